/**
 * One harness call of a dispatched turn (docs/turns.md "One message", 6), the I/O half:
 * wait for the sandbox, build the start with the plan (`turnStartOf`), stream the call,
 * check each step with the plan (`checkStep`) and commit it before it is acknowledged.
 * How the call ended comes back as a {@link HarnessEnd}, never a throw, for the plan to
 * settle.
 */
import { randomUUID } from 'node:crypto';
import { AppError, isAppError, isRetryable } from '../../common/errors';
import type { Step, TurnStart } from '../../proto/gen/polychrome/harness/v1/harness';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { ConversationStore } from './conversation-access';
import type { HarnessConnector, HarnessTurnEnd } from './harness-client';
import type { JournalView, TurnView } from './journal-view-types';
import type { RecordingFacts } from './recording-check';
import { checkStep, turnStartOf } from './plan-harness-checks';
import { type HarnessEnd } from './plan-settle';
import type { TextDeltaEvent } from './turn-service';

const HARNESS_BUSY_RETRIES = 20;

/** What a harness run needs from the coordinator. */
export interface HarnessRunPorts {
  readonly harness: HarnessConnector;
  readonly conversations: ConversationStore;
  readonly sandboxWaitMs: number;
  readonly deploymentMaxSteps: number;
  /** The turn's view as committed so far (it moves as steps are committed). */
  readonly view: (signal: AbortSignal) => Promise<JournalView>;
  readonly turn: () => TurnView;
  /** The journal's newest agent configuration, for the recording checks (docs/replay.md). */
  readonly recording: () => RecordingFacts;
  /** Commits one accepted step; resolves with its journal position. */
  readonly commitStep: (step: Step) => Promise<number>;
  readonly onDelta: (delta: TextDeltaEvent) => void;
}

/** Waits for the sandbox and runs the turn on the harness; how it ended, never a throw. */
export async function runHarness(
  ports: HarnessRunPorts,
  conversation: Conversation,
  attempt: number,
  signal: AbortSignal,
): Promise<HarnessEnd> {
  const uid = conversation.metadata.uid ?? '';
  let forged: { reason: string; toolCallId: string } | undefined;
  try {
    const endpoint = await ports.conversations.waitForSandbox(uid, ports.sandboxWaitMs, signal);
    const view = await ports.view(signal);
    const start = turnStartOf(conversation, view, ports.turn(), attempt, ports.deploymentMaxSteps);
    const ran = await callHarness(ports, endpoint, start, conversation, signal, (f) => {
      forged = f;
    });
    return ran.kind === 'paused'
      ? { kind: 'paused', request: ran.paused.request }
      : { kind: 'result', result: ran.result, carried: ran.carried };
  } catch (error) {
    if (forged !== undefined) return { kind: 'forged', ...forged };
    return { kind: 'failed', error, retryable: !signal.aborted && isRetryable(error) };
  }
}

/** Calls the harness, retrying while it still finishes a previous call. */
async function callHarness(
  ports: HarnessRunPorts,
  endpoint: string,
  start: TurnStart,
  conversation: Conversation,
  signal: AbortSignal,
  onForged: (forged: { reason: string; toolCallId: string }) => void,
): Promise<HarnessTurnEnd> {
  const turnId = start.turnId;
  for (let busy = 0; ; busy += 1) {
    try {
      return await ports.harness.runTurn(
        endpoint,
        start,
        {
          onDelta: (delta) => ports.onDelta({ turnId, step: delta.step, text: delta.text }),
          commitStep: async (step) => {
            // Checked against the dispatched turn before anything is committed.
            const reason = checkStep(
              { turn: ports.turn(), conversation, ...ports.recording() },
              step,
            );
            if (reason !== undefined) {
              const value = step.step?.value;
              onForged({
                reason,
                toolCallId: value && 'toolCallId' in value ? value.toolCallId : '',
              });
              throw new AppError('permission_denied', `step refused: ${reason}`);
            }
            return ports.commitStep(step);
          },
          trustedTool: (call) =>
            Promise.resolve({
              toolCallId: call.toolCallId,
              content: `tool ${call.toolName} runs on the control plane, and none is configured here`,
              isError: true,
              outcomeUnknownReason: '',
            }),
        },
        { signal, traceparent: traceparent(), namespace: conversation.metadata.namespace ?? '' },
      );
    } catch (error) {
      if (
        isAppError(error) &&
        error.code === 'failed_precondition' &&
        busy < HARNESS_BUSY_RETRIES
      ) {
        // The harness still finishes a cancelled call of an earlier attempt.
        await new Promise((resolve) => setTimeout(resolve, 250));
        continue;
      }
      throw error;
    }
  }
}

/** A fresh W3C traceparent for the harness call. */
function traceparent(): string {
  const hex = randomUUID().replaceAll('-', '');
  return `00-${hex}-${hex.slice(0, 16)}-01`;
}
