/**
 * A journal written by the real turn machine (harness/turn/turn-machine.ts), in memory, for
 * replay's unit tests: each turn is a `message_received`, a `turn_dispatched` with the
 * window and summary the test names, the steps the machine commits and its `turn_complete`;
 * each summary a `summary` event whose request digest is made by the same function the
 * control plane's summarizer uses (common/model/summary-request.ts) over the turns the test
 * names. The machine is given the summary's text as the harness is (`TurnStart.summary`), so
 * every request digest in the journal is one the machine made. No signing: replay reads
 * a verified journal and does not verify it again.
 */
import { encodePayload, EventKind, payloadCodecs } from '../../common/event-kinds';
import type { Message } from '../../common/model/model-port';
import { summaryRequestSha256, type SummaryInput } from '../../common/model/summary-request';
import { requestIds } from '../../common/request-ids';
import { nodeEd25519Verifier } from '../../harness/crypto/node-ed25519';
import { createPrefixRequestHasher, hex } from '../../harness/turn/agent-config';
import type { ReplayEntry } from '../../harness/turn/journal-turns';
import { agentConfigToProto, modelCallToProto } from '../../harness/turn/step-codec';
import { createTurnMachine, type TurnEvent, type TurnState } from '../../harness/turn/turn-machine';

/** The model settings of the summaries this journal records. */
export const SUMMARY_MODEL = { model: 'claude-summarizer', maxTokens: 1024 } as const;

export interface MachineTurnOptions {
  /** `turn_dispatched.history_from` (0: every earlier complete turn). */
  readonly historyFrom?: number;
  /** `turn_dispatched.summary_position` (0: none); the machine is given its text. */
  readonly summaryPosition?: number;
}

export interface MachineSummary {
  /** The summary it extends (0: none). */
  readonly previousPosition?: number;
  /** The message positions of the turns its request adds, oldest first. */
  readonly turns: readonly number[];
  readonly text: string;
  /** Recorded as is when given; else the previous summary's, or the first turn's. */
  readonly fromPosition?: number;
}

interface DoneTurn {
  readonly turnId: string;
  readonly position: number;
  readonly text: string;
  readonly reply: string;
}

export class MachineJournal {
  readonly entries: ReplayEntry[] = [];
  /** The complete turns in history (an erased one leaves it). */
  private readonly done: DoneTurn[] = [];
  /** Every turn run, erased or not. */
  private readonly ran: DoneTurn[] = [];
  private readonly summaries = new Map<number, { text: string; fromPosition: number }>();
  private recordedConfig: string | undefined;
  private readonly machine = createTurnMachine({
    ids: requestIds,
    verifier: nodeEd25519Verifier,
    approvalPublicKey: new Uint8Array(32),
    requestSha256: createPrefixRequestHasher(),
  });

  add(kind: EventKind, payload: Uint8Array): number {
    const position = this.entries.length;
    this.entries.push({ position, kind, payload });
    return position;
  }

  /** Runs one turn that answers `"re: " + text`; returns its message position. */
  turn(text: string, options: MachineTurnOptions = {}): number {
    const turnId = `turn-${String(this.ran.length + 1)}`;
    const position = this.add(
      EventKind.MessageReceived,
      encodePayload(EventKind.MessageReceived, {
        turnId,
        idempotencyKey: `key-${turnId}`,
        text,
        receivedAtMs: 1_700_000_000_000,
      }),
    );
    const historyFrom = options.historyFrom ?? 0;
    const summaryPosition = options.summaryPosition ?? 0;
    this.add(
      EventKind.TurnDispatched,
      encodePayload(
        EventKind.TurnDispatched,
        payloadCodecs.turn_dispatched.fromPartial({
          turnId,
          attempt: 1,
          messagePosition: position,
          historyFrom,
          summaryPosition,
        }),
      ),
    );
    const summary = this.summaries.get(summaryPosition)?.text;
    const reply = this.run(turnId, text, this.history(historyFrom), summary);
    this.done.push({ turnId, position, text, reply });
    this.ran.push({ turnId, position, text, reply });
    return position;
  }

  /** Appends a `summary` of the turns at `spec.turns`; returns its position. */
  summary(spec: MachineSummary): number {
    const previousPosition = spec.previousPosition ?? 0;
    const previous = this.summaries.get(previousPosition);
    const turns = spec.turns.map((at) => {
      const turn = this.ran.find((t) => t.position === at);
      if (turn === undefined) throw new Error(`machine journal: no turn at ${String(at)}`);
      return { user: turn.text, assistant: turn.reply };
    });
    const input: SummaryInput =
      previous === undefined ? { turns } : { previous: previous.text, turns };
    return this.recordSummary({
      fromPosition: spec.fromPosition ?? previous?.fromPosition ?? spec.turns[0] ?? 0,
      toPosition: spec.turns.at(-1) ?? 0,
      previousPosition,
      requestSha256: summaryRequestSha256(input, SUMMARY_MODEL),
      text: spec.text,
    });
  }

  /** Appends a `summary` with these fields (and {@link SUMMARY_MODEL}); returns its position. */
  recordSummary(fields: {
    readonly fromPosition: number;
    readonly toPosition: number;
    readonly previousPosition: number;
    readonly requestSha256: Uint8Array;
    readonly text: string;
  }): number {
    const position = this.add(
      EventKind.Summary,
      encodePayload(EventKind.Summary, {
        ...fields,
        model: SUMMARY_MODEL.model,
        maxTokens: SUMMARY_MODEL.maxTokens,
        requestSha256: Buffer.from(fields.requestSha256),
        inputTokens: 100,
        outputTokens: 20,
        createdAtMs: 1_700_000_000_000,
      }),
    );
    this.summaries.set(position, { text: fields.text, fromPosition: fields.fromPosition });
    return position;
  }

  /** The journal as the state plane serves it: an erased entry is marked excised. */
  journalEntries(): {
    position: number;
    kind: string;
    payload: Uint8Array;
    excised?: true;
    leafDigest?: Uint8Array;
  }[] {
    return this.entries.map((e) =>
      e.kind === '' ? { ...e, excised: true, leafDigest: new Uint8Array(32) } : { ...e },
    );
  }

  /**
   * Erases the entry at `position` as the state plane does: excised (no kind, no payload),
   * then an `excision` record marked erased naming its kind and turn.
   */
  erase(position: number, turnId = ''): void {
    const entry = this.entries[position];
    if (entry === undefined) throw new Error(`machine journal: no entry at ${String(position)}`);
    this.entries[position] = { position, kind: '', payload: new Uint8Array(0) };
    // An erased message or answer takes its turn out of later turns' history.
    const at = this.done.findIndex((t) => t.turnId === turnId);
    if (at >= 0) this.done.splice(at, 1);
    this.add(
      EventKind.Excision,
      encodePayload(EventKind.Excision, {
        position,
        leafDigest: Buffer.alloc(32),
        actor: 'email:admin@example.com',
        reason: 'erasure request',
        excisedAtMs: 1_700_000_000_000,
        problem: '',
        erased: true,
        erasedKind: entry.kind,
        turnId,
      }),
    );
  }

  private history(historyFrom: number): Message[] {
    return this.done
      .filter((t) => historyFrom === 0 || t.position >= historyFrom)
      .flatMap((t): Message[] => [
        { role: 'user', content: [{ type: 'text', text: t.text }] },
        { role: 'assistant', content: [{ type: 'text', text: t.reply }] },
      ]);
  }

  /** Drives the machine through one turn, recording what it commits; returns its reply. */
  private run(turnId: string, text: string, history: Message[], summary?: string): string {
    let state: TurnState = this.machine.initialState;
    let event: TurnEvent | undefined = {
      type: 'turn_started',
      input: {
        turnId,
        system: 'You are a test agent.',
        history,
        ...(summary === undefined ? {} : { summary }),
        userMessage: text,
        tools: [],
        budget: { deployment: 4 },
        recordedSteps: [],
        approvalAnswers: [],
        questionAnswers: [],
        model: { model: 'claude-test', maxTokens: 512 },
        ...(this.recordedConfig === undefined ? {} : { recordedConfigSha256: this.recordedConfig }),
      },
    };
    while (event !== undefined) {
      const result = this.machine.step(state, event);
      state = result.state;
      event = undefined;
      for (const effect of result.effects) {
        if (effect.type === 'commit_step' && effect.step.kind === 'agent_config') {
          this.recordedConfig = hex(effect.step.record.sha256);
          this.add(
            EventKind.AgentConfig,
            encodePayload(EventKind.AgentConfig, agentConfigToProto(effect.step.record)),
          );
        } else if (effect.type === 'commit_step' && effect.step.kind === 'model_call') {
          this.add(
            EventKind.ModelCall,
            encodePayload(EventKind.ModelCall, modelCallToProto(effect.step.record)),
          );
        } else if (effect.type === 'call_model') {
          event = {
            type: 'model_responded',
            response: {
              model: 'claude-test',
              content: [{ type: 'text', text: `re: ${text}` }],
              stopReason: 'end_turn',
              usage: { inputTokens: 10, outputTokens: 5 },
            },
            startedAtMs: 1,
            finishedAtMs: 2,
          };
        } else if (effect.type === 'finish') {
          this.add(
            EventKind.TurnComplete,
            encodePayload(EventKind.TurnComplete, {
              turnId,
              text: effect.text,
              steps: effect.steps,
              completedAtMs: 3,
              fallback: effect.fallback,
            }),
          );
          return effect.text;
        } else {
          throw new Error(`machine journal: unexpected effect ${effect.type}`);
        }
      }
    }
    throw new Error('machine journal: the turn did not finish');
  }
}
