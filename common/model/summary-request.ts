import { sha256 } from '@noble/hashes/sha2.js';
import { canonicalJson } from '../canonical-json';
import type { ModelRequest } from './model-port';

/**
 * The request that makes a summary (docs/turns.md, "Summaries"; its bytes:
 * docs/journal-format.md, "Summary requests"). Pure, and shared: the control plane builds
 * it to call the model, and replay builds it again from the journal to check the digest a
 * `summary` event records. Changing a byte of it (the instructions, the layout of a turn)
 * changes every digest: do it only with a new {@link SUMMARY_REQUEST_VERSION}.
 */

/** The version of these bytes; it is part of the digest. */
export const SUMMARY_REQUEST_VERSION = 1;

/** The system prompt of every summary request. */
export const SUMMARY_INSTRUCTIONS =
  'You keep the running summary of a conversation between a user and an AI agent. ' +
  'Write one summary that replaces the previous summary (when one is given) and the turns ' +
  'listed after it. Keep every fact, decision, name, number, preference, open question and ' +
  'commitment a later turn may need; drop greetings and repetition. Write in the ' +
  "conversation's language, as short paragraphs or bullet points, with no preamble.";

/** One turn a summary covers: the user's message and the agent's final reply. */
export interface SummarizedTurn {
  readonly user: string;
  readonly assistant: string;
}

/** What a summary request is made of. */
export interface SummaryInput {
  /** The text of the summary it extends; absent when it summarizes from the start. */
  readonly previous?: string;
  /** The turns it adds, oldest first. */
  readonly turns: readonly SummarizedTurn[];
}

/** The model settings a summary request is sent with; both are in its bytes. */
export interface SummaryModel {
  readonly model: string;
  readonly maxTokens: number;
}

/**
 * The one user message of a summary request: the previous summary between marker lines,
 * then each turn as one canonical JSON line `{"assistant":…,"user":…}` (JSON string
 * escapes, so no text can end a turn early or fake one).
 */
export function summaryMessageText(input: SummaryInput): string {
  const lines: string[] = [];
  if (input.previous !== undefined) {
    lines.push('Previous summary:', '<<<', input.previous, '>>>');
  }
  lines.push('Turns to add, one JSON object per line, oldest first:');
  for (const turn of input.turns) {
    lines.push(canonicalJson({ user: turn.user, assistant: turn.assistant }));
  }
  return lines.join('\n');
}

/** The model request that makes the summary of `input`. */
export function summaryRequest(input: SummaryInput): ModelRequest {
  return {
    system: SUMMARY_INSTRUCTIONS,
    messages: [{ role: 'user', content: [{ type: 'text', text: summaryMessageText(input) }] }],
    tools: [],
    toolChoice: 'auto',
  };
}

/**
 * The canonical JSON of the request as sent: `{"max_tokens", "messages", "model", "system",
 * "version"}` (keys sorted, as canonical JSON sorts them), the messages in the shape of
 * docs/replay.md's model request bytes. Its UTF-8 bytes are what {@link summaryRequestSha256}
 * hashes (the vectors pin both: docs/journal-vectors.json, `summary`).
 */
export function summaryRequestJson(input: SummaryInput, model: SummaryModel): string {
  return canonicalJson({
    version: SUMMARY_REQUEST_VERSION,
    model: model.model,
    max_tokens: model.maxTokens,
    system: SUMMARY_INSTRUCTIONS,
    messages: [{ role: 'user', content: [{ type: 'text', text: summaryMessageText(input) }] }],
  });
}

/** SHA-256 of the UTF-8 bytes of {@link summaryRequestJson}. */
export function summaryRequestSha256(input: SummaryInput, model: SummaryModel): Uint8Array {
  return sha256(new TextEncoder().encode(summaryRequestJson(input, model)));
}
