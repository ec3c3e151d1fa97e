/**
 * The patterns the Conversation schema checks strings with. Each is RE2 (the API server)
 * and a valid JavaScript RegExp (our tests). Identities and approval rules have one rule
 * each, in common/identity.ts and common/approval-rules.ts.
 */

/** RFC 1123 label, as Kubernetes object and container names. */
export const DNS_LABEL_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
/** RFC 1123 subdomain, as most Kubernetes object names. */
export const DNS_SUBDOMAIN_PATTERN =
  '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
/**
 * A Go `time.ParseDuration` string restricted to h, m and s, non-negative, so the operator
 * can parse it with a small parser: `30m`, `1h30m`, `1.5h`, `0s`, `0`.
 */
export const DURATION_PATTERN = '^(0|([0-9]+(\\.[0-9]+)?(h|m|s))+)$';
/** `spec.retention`: a {@link DURATION_PATTERN} duration, or `never`. */
export const RETENTION_PATTERN = '^(never|0|([0-9]+(\\.[0-9]+)?(h|m|s))+)$';
/** A tool name as the Messages API accepts it. */
export const TOOL_NAME_PATTERN = '^[a-zA-Z0-9_-]{1,64}$';
/** A model id: no whitespace. */
export const MODEL_PATTERN = '^\\S+$';
/** An http(s) URL without whitespace; the harness resolves it. */
export const HTTP_URL_PATTERN = '^https?://\\S+$';
/**
 * CEL on a URL string: absolute, scheme https or http, a host (CEL's URL library). The
 * pattern above only screens the scheme; this names what is wrong in words.
 */
export const HTTP_URL_RULE =
  "isURL(self) && url(self).getScheme() in ['https', 'http'] && url(self).getHostname() != ''";
/** Lower-case hex SHA-256 (the journal's root hash). */
export const SHA256_HEX_PATTERN = '^[0-9a-f]{64}$';
/** A journal key id: 16 bytes, lower-case hex (docs/journal-format.md, section 6). */
export const KEY_ID_PATTERN = '^[0-9a-f]{32}$';
/** The canonical base64 of 32 bytes: a raw ed25519 public key. */
export const ED25519_BASE64_PATTERN = '^[A-Za-z0-9+/]{43}=$';
/** `metav1.Condition` type pattern. */
export const CONDITION_TYPE_PATTERN =
  '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$';
/** `metav1.Condition` reason pattern. */
export const CONDITION_REASON_PATTERN = '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$';
/** A key of a Secret's data (`kubectl create secret` accepts these). */
export const SECRET_KEY_PATTERN = '^[-._a-zA-Z0-9]+$';
