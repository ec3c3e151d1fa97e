/**
 * How a summary enters the agent's request (docs/turns.md, "Summaries"): after the agent's
 * system prompt and a blank line, a heading line and the summary's text. Pure; the turn
 * machine and replay both use it, so replay rebuilds the bytes the model was sent.
 */

/** The line before the summary's text. */
export const SUMMARY_HEADING =
  'Summary of the earlier turns of this conversation (the turns after them follow in full):';

/** The system prompt of a request given `summary`; `system` itself when there is none. */
export function systemWithSummary(
  system: string | undefined,
  summary: string | undefined,
): string | undefined {
  if (summary === undefined || summary === '') return system;
  const block = `${SUMMARY_HEADING}\n${summary}`;
  return system === undefined || system === '' ? block : `${system}\n\n${block}`;
}
