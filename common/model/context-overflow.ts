/**
 * One rule for both model adapters: whether an API's refusal says the request is over the
 * model's context window, and what the turn's error then tells the user.
 */

/**
 * How servers say the prompt is over the context window: OpenAI (`This model's maximum
 * context length is N tokens`, code `context_length_exceeded`), vLLM (the same sentence),
 * LiteLLM (`ContextWindowExceededError`), llama.cpp (`exceeds the available context size`),
 * and Anthropic (`prompt is too long: N tokens > M maximum`), directly or behind a gateway.
 */
const CONTEXT_OVERFLOW =
  /context[_ ]length[_ ]exceeded|maximum context length|context ?window ?exceeded|exceeds? the (?:available )?context (?:size|window|length)|prompt is too long/iu;

/** Whether a refusal (its error code, when the API gives one, and message) is a context overflow. */
export function isContextOverflow(code: string | undefined, message: string): boolean {
  return code === 'context_length_exceeded' || CONTEXT_OVERFLOW.test(message);
}

/** What the turn's error says after the API's own words when the history is too long. */
export function contextOverflowAdvice(model: string): string {
  return `the conversation's history is longer than model ${model} can read (its context window); a retry will not help: start a new conversation, or run this one on a model with a larger context window`;
}
