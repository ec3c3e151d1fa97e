/**
 * Ordering of resourceVersions, as Kubernetes 1.35 made it part of the API (KEP-5504,
 * "Comparable Resource Version", stable in v1.35; `k8s.io/apimachinery/pkg/util/resourceversion`
 * has the Go helper). Two resourceVersions of objects of the same resource compare as
 * positive decimal integers without leading zeros, of any length.
 *
 * A value in another form (an older or a non-etcd API server) cannot be ordered, so callers
 * fall back to equality, the only comparison the API promised before.
 */

const WELL_FORMED = /^[1-9][0-9]*$/;

/**
 * -1, 0 or 1 as `a` is older than, the same as or newer than `b`; undefined when either is
 * not a well-formed resourceVersion.
 */
export function compareResourceVersions(a: string, b: string): -1 | 0 | 1 | undefined {
  if (!WELL_FORMED.test(a) || !WELL_FORMED.test(b)) return undefined;
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  if (a === b) return 0;
  return a < b ? -1 : 1;
}

/** True when `seen` is `written` or a later version of the same object. */
export function isAtLeast(seen: string, written: string): boolean {
  const order = compareResourceVersions(seen, written);
  return order === undefined ? seen === written : order >= 0;
}
