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
 * delegates a task to (`__delegate_to`, docs/turns.md "Delegation") runs on a thread whose
 * `invoke_agent` span is a child of the span of the agent that asked, from
 * {@link enterThread} to {@link closeThread}; its model and tool spans (which name the
 * thread) are children of it. A panel's threads are open side by side.
 * With tracing off nothing is made and {@link parent} is undefined.
 */
export class AgentSpans implements GenAiSpanScope {
  private readonly turnContext: Context = activeTraceContext();
  private current: { span: Span; context: Context } | undefined;
  /** The open threads' spans, by thread; a panel's threads are open side by side. */
  private readonly threads = new Map<string, { span: Span; context: Context; asker: string }>();

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
    this.current = this.open(name, this.turnContext, this.turn.model);
  }

  /**
   * Opens the span of the thread `thread`, on which `name` does a task another agent asked
   * for: a child of the asking agent's span, the one answering on `asker` ('' for the
   * turn's own agent).
   *
   * @param model `gen_ai.request.model` of the delegate; empty: the turn's
   */
  enterThread(thread: string, name: string, model: string, asker = ''): void {
    const opened = this.open(
      name,
      this.parent(asker) ?? this.turnContext,
      model || this.turn.model,
    );
    if (opened !== undefined) this.threads.set(thread, { ...opened, asker });
  }

  /** Ends the span of `thread`, and of any thread still open under it. */
  closeThread(thread: string, error?: unknown): void {
    const open = this.threads.get(thread);
    if (open === undefined) return;
    for (const [inner, { asker }] of [...this.threads]) {
      if (asker === thread) this.closeThread(inner, error);
    }
    this.threads.delete(thread);
    if (error !== undefined) recordSpanError(open.span, error);
    open.span.end();
  }

  parent(thread = ''): Context | undefined {
    if (thread !== '') {
      const open = this.threads.get(thread);
      if (open !== undefined) return open.context;
    }
    return this.current?.context;
  }

  /** Ends every open span, threads first; `error` (the turn failed in them) marks them failed. */
  end(error?: unknown): void {
    for (const [thread, { asker }] of [...this.threads]) {
      if (asker === '') this.closeThread(thread, error);
    }
    for (const thread of [...this.threads.keys()]) this.closeThread(thread, error);
    const open = this.current;
    this.current = undefined;
    if (open === undefined) return;
    if (error !== undefined) recordSpanError(open.span, error);
    open.span.end();
  }

  private open(
    name: string | undefined,
    parent: Context,
    model: string,
  ): { span: Span; context: Context } | undefined {
    const agent = name === undefined || name === '' ? DEFAULT_AGENT_NAME : name;
    return startSpan(`${GenAiOperation.InvokeAgent} ${agent}`, {
      kind: SpanKind.INTERNAL,
      parent,
      attributes: {
        'gen_ai.operation.name': GenAiOperation.InvokeAgent,
        'gen_ai.provider.name': this.turn.provider,
        'gen_ai.agent.name': agent,
        ...(model === '' ? {} : { 'gen_ai.request.model': model }),
        ...conversationAttributes(this.turn.conversationId),
      },
    });
  }
}
