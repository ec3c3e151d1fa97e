import { UsageError } from './cli-support';

/*
 * The ed25519 public-key flags every verifying command takes (`--public-key`, repeatable,
 * for the state plane's journal keys; `--approval-key` for the control plane's approval
 * key): one reader, so `journal verify|replay` and `conversation verify|replay` accept the
 * same text.
 */

/** The form a key flag takes, for usage errors. */
export const PUBLIC_KEY_FORMAT = '64 hex digits or the base64 of 32 bytes';

/**
 * One raw ed25519 public key: 64 hex digits, or the canonical base64 of 32 bytes.
 * @param flag names the flag in the error.
 * @throws UsageError when the text is neither, showing the form.
 */
export function parsePublicKey(text: string, flag = '--public-key'): Uint8Array {
  const trimmed = text.trim();
  if (/^[0-9a-fA-F]{64}$/u.test(trimmed)) return new Uint8Array(Buffer.from(trimmed, 'hex'));
  const bytes = Buffer.from(trimmed, 'base64');
  if (bytes.length === 32 && bytes.toString('base64') === trimmed) return new Uint8Array(bytes);
  throw new UsageError(
    `${flag} ${JSON.stringify(trimmed.slice(0, 80))} is not a raw ed25519 public key: ` +
      `give ${PUBLIC_KEY_FORMAT}`,
  );
}

/**
 * Every `--public-key` given (the flag is declared `multiple`), in order; none: `[]`.
 * @throws UsageError for the first one that does not read.
 */
export function parsePublicKeyFlags(values: Readonly<Record<string, unknown>>): Uint8Array[] {
  const raw = values['public-key'];
  const texts = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw];
  return texts.map((text) => {
    if (typeof text !== 'string') throw new UsageError('--public-key needs a value');
    return parsePublicKey(text);
  });
}

/** The parseArgs declaration of the repeatable `--public-key`. */
export const publicKeyOption = { 'public-key': { type: 'string', multiple: true } } as const;
