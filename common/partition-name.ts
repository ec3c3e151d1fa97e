import { AppError } from './errors';

/**
 * A journal partition name: `conv-` followed by a Kubernetes uid-like id (lowercase
 * letters, digits and `-`, starting with a letter or digit, at most 63 characters), as
 * docs/design.md names them (`conv-{metadata.uid}`). The shape also keeps names free of the
 * 0x00 byte, which the key layout uses as the end of the name.
 */
export const PARTITION_NAME_PATTERN = /^conv-[a-z0-9][a-z0-9-]{0,62}$/;

/**
 * The journal partition of the conversation with `uid` (its `metadata.uid`): the one place
 * the `conv-` prefix is spelled for the planes.
 */
export function partitionOf(uid: string): string {
  return `conv-${uid}`;
}

/** True when `value` is a well-formed partition name. */
export function isPartitionName(value: unknown): value is string {
  return typeof value === 'string' && PARTITION_NAME_PATTERN.test(value);
}

/**
 * Throws unless `value` is a well-formed partition name.
 *
 * @throws AppError `invalid_argument` naming the bad value and the expected shape.
 */
export function assertPartitionName(value: unknown): asserts value is string {
  if (isPartitionName(value)) return;
  const shown = typeof value === 'string' ? JSON.stringify(value.slice(0, 80)) : typeof value;
  throw new AppError(
    'invalid_argument',
    `partition name ${shown} is not valid: expected "conv-" followed by a Kubernetes uid ` +
      '(1 to 63 characters of a-z, 0-9 and "-", starting with a letter or digit), e.g. ' +
      '"conv-3f2a9c1e-8b4d-4e0a-9c6f-2d7e5b1a0c93"',
    { details: { partition: typeof value === 'string' ? value.slice(0, 80) : null } },
  );
}
