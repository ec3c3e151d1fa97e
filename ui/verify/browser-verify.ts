/**
 * What the forensics UI verifies in the browser (docs/ui.md, "What the browser verifies"):
 * the export's bytes, replayed with the project's own pure journal code
 * (state/journal/export-verify.ts) and @noble crypto, against a key the user pinned (or the
 * export header's, said as such), and against the Conversation's `status.journal`
 * checkpoint. Every event's inclusion proof can be checked against the signed root that
 * covers it. Nothing the server says is taken on trust: leaves, the MMR, roots and
 * signatures are recomputed here. Pure and DOM-free, so it runs in Node tests too.
 */
import { AppError } from '../../common/errors';
import { decodePayload, EventKind, isEventKind, payloadCodecs } from '../../common/event-kinds';
import type {
  ExportCheckpoint,
  ExportEvent,
  ExportHeader,
} from '../../common/journal-export-format';
import { decodeBase64, parseCheckpoint } from '../../common/journal-export-parse';
import type { Ed25519Verifier } from '../../state/journal/ed25519';
import {
  ExportVerifier,
  missingCheckpoint,
  type ExportFailure,
  type ExportVerification,
} from '../../state/journal/export-verify';
import { fromHex, toHex } from '../../state/journal/hex';
import { buildInclusionProof, verifyInclusion } from '../../state/journal/inclusion-proof';
import { LeafHasher } from '../../state/journal/leaf-digest';
import type { Sha256 } from '../../state/journal/sha256';
import { keyIdOf } from '../../state/journal/signed-root';
import { auditBrowserPayments, type BrowserPayments } from './browser-payments';

/** The crypto the browser brings (state/journal/noble-crypto.ts gives it). */
export interface VerifyCrypto {
  readonly sha256: Sha256;
  readonly verifier: Ed25519Verifier;
}

/** A public key as the UI shows it. */
export interface KeyInfo {
  readonly keyId: string;
  /** SHA-256 of the raw key, hex in groups of four, to compare by eye. */
  readonly fingerprint: string;
}

/** One event of the export, decoded here from its bytes. */
export interface VerifiedEvent {
  readonly position: number;
  readonly kind: string;
  /** The payload in proto3 JSON, decoded in the browser; null when excised or unknown. */
  readonly payload: unknown;
  readonly excised: boolean;
  /** The leaf digest recomputed here (the kept one for an excised entry). */
  readonly leafHex: string;
  /** Covered by a signed root that passed every check. */
  readonly sealed: boolean;
}

/** The whole verdict. */
export interface BrowserVerification {
  readonly result: ExportVerification;
  /** The first failure, the missing checkpoint included; undefined when all passed. */
  readonly failure: ExportFailure | undefined;
  readonly ok: boolean;
  readonly headerKeys: readonly KeyInfo[];
  readonly trustedKeys: readonly KeyInfo[];
  readonly events: readonly VerifiedEvent[];
  /** Every MMR node replay computed, by position (for inclusion proofs). */
  readonly nodes: readonly Uint8Array[];
  /** The signed roots in the export: position, leaf count and root. */
  readonly roots: readonly { position: number; leafCount: number; root: Uint8Array }[];
  /** The export's payments, audited here (browser-payments.ts). */
  readonly payments: BrowserPayments;
}

/** The outcome of one inclusion proof. */
export interface InclusionCheck {
  readonly ok: boolean;
  readonly position: number;
  /** The signed root the proof was checked against (its position and leaf count). */
  readonly rootPosition: number;
  readonly leafCount: number;
  readonly digests: number;
  readonly message: string;
}

/** The fingerprint of a raw public key: its SHA-256, hex, in groups of four. */
export function fingerprintOf(sha256: Sha256, publicKey: Uint8Array): string {
  return (toHex(sha256(publicKey)).match(/.{4}/gu) ?? []).join(' ');
}

function keyInfo(sha256: Sha256, publicKey: Uint8Array): KeyInfo {
  return { keyId: keyIdOf(sha256, publicKey), fingerprint: fingerprintOf(sha256, publicKey) };
}

/**
 * Reads a public key the user pastes: 32 raw bytes as base64 (the export header's form) or
 * as 64 hex digits. A string says what is wrong.
 */
export function parsePublicKey(text: string): Uint8Array | string {
  const trimmed = text.trim();
  const bytes = /^[0-9a-fA-F]{64}$/u.test(trimmed)
    ? fromHex(trimmed, 'public key')
    : decodeBase64(trimmed);
  if (bytes === undefined || bytes.length !== 32) {
    return 'a public key is 32 bytes, as base64 (the export header publicKeys[].publicKey) or 64 hex digits';
  }
  return bytes;
}

/**
 * The checkpoint of a Conversation's `status.journal` (`head`, `lastSignedRoot`, `keyId`),
 * or undefined when it names none. A string says what is wrong with it.
 */
export function statusJournalCheckpoint(journal: unknown): ExportCheckpoint | undefined | string {
  if (typeof journal !== 'object' || journal === null) return undefined;
  const { head, lastSignedRoot, keyId } = journal as Record<string, unknown>;
  if (head === undefined || lastSignedRoot === undefined) return undefined;
  if (typeof head !== 'number' || typeof lastSignedRoot !== 'string') {
    return 'status.journal does not read: head must be a number and lastSignedRoot a string';
  }
  const key = typeof keyId === 'string' && keyId !== '' ? `:${keyId}` : '';
  const parsed = parseCheckpoint(`${String(head)}:${lastSignedRoot}${key}`);
  return typeof parsed === 'string' ? `status.journal does not read: ${parsed}` : parsed;
}

function decodedPayload(event: ExportEvent): unknown {
  if (event.excisedLeaf !== undefined || !isEventKind(event.kind)) return null;
  try {
    const codec = payloadCodecs[event.kind] as {
      decode(bytes: Uint8Array): unknown;
      toJSON(message: unknown): unknown;
    };
    return codec.toJSON(codec.decode(event.payload));
  } catch {
    return null;
  }
}

function signedRootOf(event: ExportEvent): { leafCount: number; root: Uint8Array } | undefined {
  if (event.kind !== EventKind.SignedRoot || event.excisedLeaf !== undefined) return undefined;
  try {
    const payload = decodePayload(EventKind.SignedRoot, event.payload);
    return { leafCount: payload.leafCount, root: new Uint8Array(payload.root) };
  } catch {
    return undefined;
  }
}

/**
 * Verifies the export `text` (NDJSON) in full.
 *
 * @param pinnedKey the key the user pinned; without one, the header's keys are trusted and
 *   the verdict says so (`result.trust`).
 * @param checkpoint the Conversation's `status.journal`; without one, a journal with events
 *   fails `no_checkpoint`, as `polychrome conversation verify` does.
 * @throws AppError `invalid_argument` when the text is no export (see ExportVerifier).
 */
export function verifyExportText(
  text: string,
  crypto: VerifyCrypto,
  options: {
    readonly pinnedKey?: Uint8Array;
    readonly checkpoint?: ExportCheckpoint;
    readonly source: string;
    /** The approval key the user pinned; without one, the export header's is trusted. */
    readonly approvalKey?: Uint8Array;
  },
): BrowserVerification {
  const read: ExportEvent[] = [];
  const nodes: Uint8Array[] = [];
  const verifier = new ExportVerifier({
    hash: crypto.sha256,
    pinnedKeys: options.pinnedKey === undefined ? [] : [options.pinnedKey],
    source: options.source,
    ...(options.checkpoint === undefined ? {} : { checkpoint: options.checkpoint }),
    onEvent: (event) => read.push(event),
    visit: (position, digest) => {
      nodes[position] = digest;
    },
  });
  for (const line of text.split('\n')) {
    verifier.addLine(line);
    if (verifier.stopped) break;
  }
  const result = verifier.finish(crypto.verifier);
  const header = verifier.header as ExportHeader;
  const failure = result.failure ?? missingCheckpoint(result);
  const leaves = new LeafHasher(crypto.sha256);
  const roots: { position: number; leafCount: number; root: Uint8Array }[] = [];
  const events = read.map((event): VerifiedEvent => {
    const root = signedRootOf(event);
    if (root !== undefined) roots.push({ position: event.position, ...root });
    const leaf = event.excisedLeaf ?? leaves.digest(event.position, event.kind, event.payload);
    return {
      position: event.position,
      kind: event.excisedLeaf === undefined ? event.kind : 'excised',
      payload: decodedPayload(event),
      excised: event.excisedLeaf !== undefined,
      leafHex: toHex(leaf),
      sealed: event.position < result.verifiedLeafCount,
    };
  });
  const trusted =
    options.pinnedKey === undefined
      ? header.publicKeys.map((k) => k.publicKey)
      : [options.pinnedKey];
  return {
    result,
    failure,
    ok: failure === undefined,
    headerKeys: header.publicKeys.map((k) => keyInfo(crypto.sha256, k.publicKey)),
    trustedKeys: trusted.map((k) => keyInfo(crypto.sha256, k)),
    events,
    nodes,
    roots,
    payments: auditBrowserPayments(read, header, crypto.verifier, options.approvalKey),
  };
}

/**
 * Checks the inclusion proof of the event at `position`: built from the nodes recomputed
 * here, checked against the first signed root that covers it and passed verification.
 */
export function checkInclusion(
  verification: BrowserVerification,
  position: number,
  sha256: Sha256,
): InclusionCheck {
  const event = verification.events.find((e) => e.position === position);
  const root = verification.roots.find(
    (r) => r.leafCount > position && r.leafCount <= verification.result.verifiedLeafCount,
  );
  if (event === undefined || root === undefined) {
    return {
      ok: false,
      position,
      rootPosition: -1,
      leafCount: 0,
      digests: 0,
      message: `event ${String(position)} is not covered by a verified signed root yet`,
    };
  }
  const proof = buildInclusionProof(position, root.leafCount, (p) => verification.nodes[p]);
  const base = {
    position,
    rootPosition: root.position,
    leafCount: root.leafCount,
    digests: proof.digests.length,
  };
  try {
    verifyInclusion(sha256, proof, fromHex(event.leafHex, 'leaf'), root.root);
    return {
      ...base,
      ok: true,
      message: `event ${String(position)} is leaf ${String(position)} of the ${String(root.leafCount)} signed at position ${String(root.position)} (${String(proof.digests.length)} digests)`,
    };
  } catch (error) {
    return {
      ...base,
      ok: false,
      message: error instanceof AppError ? error.message : String(error),
    };
  }
}
