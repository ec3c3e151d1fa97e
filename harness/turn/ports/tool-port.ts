import type { JsonObject } from '../../../common/canonical-json';

/**
 * The tool port: the narrow interface the turn loop uses to run tools. The turn machine
 * owns it; the built-in tools and the MCP adapter (`harness/tools/`) and the trusted-tool
 * proxy (tools that run on the control plane, `harness/server/`) implement it.
 */

/** One call the turn loop asks for. */
export interface ToolCallRequest {
  readonly turnId: string;
  readonly toolCallId: string;
  readonly name: string;
  readonly input: JsonObject;
  /** Canonical JSON of `input`, as recorded in the journal. */
  readonly argsJson: string;
  /** The model round trip (1-based) that asked for the call. */
  readonly step: number;
  /** The turn's effective step budget. */
  readonly maxSteps: number;
  /** The delegation thread asking (its `__delegate_to` call's id); absent at the top. */
  readonly thread?: string;
}

/** Options of one tool call. */
export interface ToolCallOptions {
  /** Aborted when the turn is cancelled or the timeout passes. */
  readonly signal: AbortSignal;
  /** The runner should give up after this long; the shell abandons the call then anyway. */
  readonly timeoutMs: number;
}

/**
 * A tool's answer. `isError: true` means the tool ran and reported a failure the model
 * should see (bad arguments, a 4xx from an API): the outcome is known.
 */
export interface ToolOutcome {
  readonly content: string;
  readonly isError: boolean;
  /**
   * The tool's HTTP call got 402 Payment Required: the harness cannot pay, so the turn
   * sends the challenge to the control plane (docs/payments.md, "A paid call in a turn")
   * and `content` is not the call's result.
   */
  readonly paymentRequired?: PaymentRequired;
}

/**
 * What a 402 told the tool: where it called and the response's headers; or, for an MCP
 * server's tool, the x402 `PaymentRequired` its result carried (x402's MCP transport).
 */
export interface PaymentRequired {
  /** The URL the tool called, as it called it; an MCP tool's `mcp://<server>/<tool>`. */
  readonly url: string;
  /** The 402 response's headers, names lower-case, as received (none for an MCP tool). */
  readonly headers: readonly (readonly [name: string, value: string])[];
  /** An MCP tool's `PaymentRequired`, as JSON. */
  readonly mcpPaymentRequired?: string;
}

/**
 * Runs tools by name.
 *
 * `call` resolves with a {@link ToolOutcome} whenever the outcome is known, failures
 * included. It rejects only when the outcome is unknown (the transport broke mid-call,
 * the timeout passed, the signal aborted): for a side-effecting tool the turn then
 * becomes ambiguous rather than guessing, so an adapter must not reject for failures it
 * knows did not take effect.
 */
export interface ToolRunner {
  call(request: ToolCallRequest, options: ToolCallOptions): Promise<ToolOutcome>;
}
