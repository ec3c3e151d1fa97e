/** Times as Kubernetes writes them (`metav1.Time`): RFC 3339 text in, milliseconds out. */

/** RFC 3339 with second precision, as `metav1.Time` is written. */
export function formatTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/u, 'Z');
}

/** Milliseconds of an RFC 3339 time, or undefined when absent or unparseable. */
export function parseTime(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : ms;
}
