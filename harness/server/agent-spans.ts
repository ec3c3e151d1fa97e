import {
  conversationAttributes,
  DEFAULT_AGENT_NAME,
  GenAiOperation,
  type GenAiSpanScope,
} from '../../common/genai-attributes';
import {
  activeTraceContext,
  recordSpanError,
  SpanKind,
  startSpan,
  type Context,
  type Span,
} from '../../common/tracing';

/** What every agent span of a turn shares. */
export interface AgentSpanTurn {
  readonly conversationId: string;
  /** `gen_ai.provider.name` (`anthropic`); `_OTHER` when the provider names none. */
  readonly provider: string;
  /** `gen_ai.request.model`; empty: left out. */
  readonly model: string;
}

/**
 * The `invoke_agent <agent name>` spans of one turn (GenAI conventions; INTERNAL: the agent
 * runs in this process), one per agent segment: the turn's first agent from the start, and
 * each agent a handoff passes the turn to from {@link enter}, which ends the one before.
 * All are children of the context active when this was made (the RunTurn span); the model
 * and tool spans of a segment are children of its span ({@link parent}). An agent another
 * delegates to through a tool call gets AgentSpans of its own, made inside that call, so
 * its spans nest under the call's `execute_tool` span. With tracing off nothing is made
 * and {@link parent} is undefined.
 */
export class AgentSpans implements GenAiSpanScope {
  private readonly turnContext: Context = activeTraceContext();
  private current: { span: Span; context: Context } | undefined;

  constructor(private readonly turn: AgentSpanTurn) {}

  get conversationId(): string {
    return this.turn.conversationId;
  }

  /**
   * Ends the open agent span and opens the next agent's.
   *
   * @param name the agent's `spec.agent.name`; absent or empty: {@link DEFAULT_AGENT_NAME}
   */
  enter(name: string | undefined): void {
    this.end();
    const agent = name === undefined || name === '' ? DEFAULT_AGENT_NAME : name;
    this.current = startSpan(`${GenAiOperation.InvokeAgent} ${agent}`, {
      kind: SpanKind.INTERNAL,
      parent: this.turnContext,
      attributes: {
        'gen_ai.operation.name': GenAiOperation.InvokeAgent,
        'gen_ai.provider.name': this.turn.provider,
        'gen_ai.agent.name': agent,
        ...(this.turn.model === '' ? {} : { 'gen_ai.request.model': this.turn.model }),
        ...conversationAttributes(this.turn.conversationId),
      },
    });
  }

  parent(): Context | undefined {
    return this.current?.context;
  }

  /** Ends the open agent span, if any; `error` (the turn failed in it) marks it failed. */
  end(error?: unknown): void {
    const open = this.current;
    this.current = undefined;
    if (open === undefined) return;
    if (error !== undefined) recordSpanError(open.span, error);
    open.span.end();
  }
}
