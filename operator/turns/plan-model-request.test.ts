import { describe, expect, it } from '@jest/globals';
import { ModelApi } from '../../common/model/model-port';
import type { TurnStart } from '../../proto/gen/polychrome/harness/v1/harness';
import type { ModelRoute } from './model-relay-port';
import { modelFailure, planModelRequest, relayedStart } from './plan-model-request';

const route: ModelRoute = {
  provider: ModelApi.OpenAi,
  model: 'qwen',
  baseUrl: 'http://vllm:8000/v1',
  maxTokens: 512,
  secretKeyRef: { name: 'k', key: 'api-key' },
  namespace: 'team-a',
};
const routes = new Map([['triage', route]]);
const REQUEST = '{"messages":[],"toolChoice":"auto","tools":[]}';

function start(name: string): TurnStart {
  return {
    conversationId: 'c',
    turnId: 't',
    attempt: 1,
    agent: {
      model: 'spec-model',
      systemPrompt: 'p',
      name,
      relayModelCalls: false,
      provider: '',
      maxTokens: 0,
    },
    history: [],
    userMessage: 'hi',
    tools: [],
    approvalAnswers: [],
    questionAnswers: [],
    recordedSteps: [],
    requiredApprover: '',
    recordedConfigSha256: Buffer.alloc(0),
    memory: [],
    memoryBudgetBytes: 0,
    paymentCharges: [],
    requestTimes: [],
    agents: [],
    summary: '',
  };
}

describe('planModelRequest', () => {
  it('calls along the route dispatched for the agent the request names', () => {
    expect(
      planModelRequest(routes, { step: 2, agent: 'triage', requestJson: REQUEST, thread: '' }),
    ).toEqual({
      kind: 'call',
      route,
      request: { messages: [], toolChoice: 'auto', tools: [] },
    });
  });

  it.each([['billing'], [''], ['TRIAGE']])(
    'refuses as forged a request for agent %j, which has no route',
    (agent) => {
      const plan = planModelRequest(routes, { step: 1, agent, requestJson: REQUEST, thread: '' });
      expect(plan).toEqual({
        kind: 'forged',
        reason: `model_request of step 1 names agent ${JSON.stringify(agent)}, whose model calls the control plane was not dispatched to make`,
      });
    },
  );

  it('answers a malformed request invalid_argument, not retryable, naming the field', () => {
    const plan = planModelRequest(routes, {
      step: 3,
      agent: 'triage',
      requestJson: '{}',
      thread: '',
    });
    expect(plan.kind).toBe('refused');
    const answer = plan.kind === 'refused' ? plan.answer : undefined;
    expect(answer?.step).toBe(3);
    expect(answer?.answer?.$case === 'failure' ? answer.answer.value : undefined).toMatchObject({
      code: 'invalid_argument',
      retryable: false,
      message: expect.stringMatching(/^model_request\.request_json\.messages /) as unknown,
    });
  });
});

describe('modelFailure', () => {
  it('keeps an AppError, retryable by its code, and hides anything else', () => {
    expect(
      modelFailure({ step: 1, thread: '' }, new Error('socket to sk-secret closed')).answer,
    ).toEqual({
      $case: 'failure',
      value: {
        code: 'internal',
        message:
          "the relayed model call of step 1 failed unexpectedly (a bug of the control plane's model relay)",
        retryable: true,
      },
    });
  });
});

describe('relayedStart', () => {
  it("marks the start's agent relayed with the route's model, provider and max tokens", () => {
    expect(relayedStart(start('triage'), routes).agent).toEqual({
      model: 'qwen',
      systemPrompt: 'p',
      name: 'triage',
      relayModelCalls: true,
      provider: 'openai',
      maxTokens: 512,
    });
  });

  it('leaves an agent without a route as it is', () => {
    expect(relayedStart(start('billing'), routes)).toEqual(start('billing'));
  });
});
