/**
 * A turn's start and a reader of a harness call for the connector's tests
 * (harness-client.test.ts, harness-ca.test.ts): plain replies only.
 */
import type { TurnStart } from '../../../proto/gen/polychrome/harness/v1/harness';
import type { HarnessCall, HarnessMessage } from '../harness-call';

/** A first attempt of turn `turnId` of `conversationId` saying hello, with nothing recorded. */
export function start(conversationId: string, turnId: string): TurnStart {
  return {
    conversationId,
    turnId,
    attempt: 1,
    history: [],
    userMessage: 'hello',
    tools: [],
    approvalAnswers: [],
    questionAnswers: [],
    recordedSteps: [],
    requiredApprover: '',
    recordedConfigSha256: Buffer.alloc(0),
    summary: '',
    memory: [],
    memoryBudgetBytes: 0,
    agents: [],
    paymentCharges: [],
    requestTimes: [],
  };
}

/** Where a test's reader "commits" each step: the next position, counted. */
export interface Sink {
  committed: number;
  commit(): Promise<number>;
}

export function handlers(): Sink {
  const state: Sink = {
    committed: 0,
    commit: () => Promise.resolve(++state.committed),
  };
  return state;
}

/**
 * Reads the call to its end, acking each step with the position `sink` gives; nothing else
 * is expected of a plain reply.
 */
export async function readToEnd(
  call: HarnessCall,
  sink: Sink = handlers(),
): Promise<HarnessMessage> {
  for await (const message of call) {
    switch (message.kind) {
      case 'step':
        call.committed(message.step.sequence, await sink.commit());
        break;
      case 'delta':
        break;
      case 'trusted_tool':
        throw new Error('no trusted tool in this test');
      case 'model_request':
        throw new Error('no relayed model call in this test');
      case 'payment_challenge':
      case 'payment_settle':
      case 'mcp_paid_result':
        throw new Error('no paid call in this test');
      case 'paused':
      case 'result':
        return message;
    }
  }
  throw new Error('the call ended without its end');
}
