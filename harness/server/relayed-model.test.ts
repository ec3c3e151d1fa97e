/**
 * A relayed agent over real gRPC (docs/turns.md, "Who calls the model"): the harness sends
 * its model calls up the RunTurn stream, and the control plane's side answers them by
 * calling the real Anthropic adapter against the local Messages API server, streaming its
 * fragments down. The harness's own provider is never asked, and no key is given to it.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { Metadata, type ClientDuplexStream } from '@grpc/grpc-js';
import pino from 'pino';
import { AnthropicProvider } from '../../common/model/anthropic-provider';
import { modelRequestFromJson, modelResponseToJson } from '../../common/model/model-json';
import {
  HARNESS_CREDENTIAL_AUDIENCE,
  HARNESS_CREDENTIAL_METADATA,
  encodeHarnessCredential,
} from '../../common/harness-credential';
import {
  HarnessClient,
  type ModelRequest as ModelRequestMessage,
  type TurnInput,
  type TurnOutput,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { MessagesApiServer } from '../../test/support/messages-api-server';
import { testHarnessCertificate, testHarnessChannel } from '../../test/support/harness-tls';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import { ScriptedProvider } from '../model/scripted-provider';
import { builtinToolRunner, builtinTools } from '../tools/builtin-tools';
import { decodeAgentConfig } from '../turn/agent-config';
import { HarnessServer } from './harness-server';
import { turnRequestToProto, type TurnRequest } from './turn-start-codec';

const approvalKey = nodeEd25519Signer(new Uint8Array(32).fill(7));
const logger = pino({ level: 'silent' });
const KEY = 'sk-ant-control-plane-only';

let closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.reverse()) await close();
  closers = [];
});

/** The harness (its own provider has no replies: a call to it fails the test) and a client. */
async function rig(): Promise<{ client: HarnessClient; own: ScriptedProvider }> {
  const own = new ScriptedProvider({ replies: [] }, 'own');
  const server = new HarnessServer({
    host: '127.0.0.1',
    port: 0,
    certificate: await testHarnessCertificate('team-a', logger),
    namespace: 'team-a',
    logger,
    requireApproval: [],
    ackTimeoutMs: 5_000,
    deps: {
      modelFor: () => own,
      tools: builtinToolRunner,
      approvalVerifier: nodeEd25519Verifier,
      approvalPublicKey: approvalKey.publicKey,
      clock: { nowMs: () => 1_000 },
    },
  });
  const port = await server.start();
  const channel = await testHarnessChannel('team-a');
  const client = new HarnessClient(`127.0.0.1:${port}`, channel.credentials, channel.options);
  closers.push(() => server.close());
  closers.push(() => client.close());
  return { client, own };
}

async function messagesApi(): Promise<MessagesApiServer> {
  const api = await MessagesApiServer.start({ apiKey: KEY });
  closers.push(() => api.close());
  return api;
}

function metadata(): Metadata {
  const m = new Metadata();
  m.set(
    HARNESS_CREDENTIAL_METADATA,
    encodeHarnessCredential(
      {
        aud: HARNESS_CREDENTIAL_AUDIENCE,
        conversation: 'c-1',
        namespace: 'team-a',
        iat: 900,
        exp: 60_000,
      },
      (message) => approvalKey.sign(message),
    ),
  );
  return m;
}

const relayedTurn: TurnRequest = {
  conversationId: 'c-1',
  turnId: 't-1',
  attempt: 1,
  model: 'claude-relayed',
  relay: { provider: 'anthropic', maxTokens: 512 },
  input: {
    turnId: 't-1',
    agentName: 'triage',
    history: [],
    userMessage: 'what is 2+2?',
    tools: builtinTools.filter((tool) => tool.name === 'calculator'),
    budget: {},
    recordedSteps: [],
    approvalAnswers: [],
    questionAnswers: [],
  },
};

type Output = NonNullable<TurnOutput['output']>;
type Values = { [K in Output['$case']]: Extract<Output, { $case: K }>['value'] };

/** How the control plane's side answers one model request. */
type Answer = (request: ModelRequestMessage, call: RelayingCall) => void | Promise<void>;

/** The control plane on one call: acks steps, answers each model request with `answer`. */
class RelayingCall {
  readonly outputs: TurnOutput[] = [];
  readonly stream: ClientDuplexStream<TurnInput, TurnOutput>;
  readonly ended: Promise<{ code: number; details: string }>;

  constructor(client: HarnessClient, start: TurnRequest, answer: Answer) {
    this.stream = client.runTurn(metadata());
    this.stream.on('data', (output: TurnOutput) => {
      this.outputs.push(output);
      const value = output.output;
      if (value?.$case === 'step' && !value.value.commitWithResult) {
        const sequence = value.value.sequence;
        this.send({ $case: 'stepCommitted', value: { sequence, position: sequence } });
      }
      if (value?.$case === 'modelRequest') void answer(value.value, this);
    });
    this.stream.on('error', () => undefined);
    this.ended = new Promise((resolve) => this.stream.on('status', resolve));
    this.send({ $case: 'start', value: turnRequestToProto(start) });
  }

  send(input: TurnInput['input']): void {
    this.stream.write({ input });
  }

  /** The values of the outputs of one kind, in order. */
  of<C extends Output['$case']>(kind: C): Values[C][] {
    return this.outputs.flatMap(({ output }) =>
      output?.$case === kind ? [output.value as Values[C]] : [],
    );
  }
}

/** Answers as the control plane's relay does: the real adapter, fragments streamed down. */
function relayTo(api: MessagesApiServer): Answer {
  const provider = new AnthropicProvider({
    apiKey: KEY,
    baseUrl: api.url,
    model: 'claude-relayed',
    maxTokens: 512,
    initialBackoffMs: 1,
    random: () => 0,
  });
  return async (request, call) => {
    const { step, thread } = request;
    const response = await provider.complete(
      modelRequestFromJson(request.requestJson, 'request_json'),
      {
        signal: AbortSignal.timeout(10_000),
        onTextDelta: (text) => call.send({ $case: 'modelDelta', value: { step, text, thread } }),
      },
    );
    call.send({
      $case: 'modelAnswer',
      value: {
        step,
        thread,
        answer: { $case: 'responseJson', value: modelResponseToJson(response) },
      },
    });
  };
}

describe('a relayed agent over RunTurn', () => {
  it('sends each model call up the stream; the answer and its fragments come down from the control plane side', async () => {
    const { client, own } = await rig();
    const api = await messagesApi();
    api.enqueue(
      { kind: 'error', status: 429, retryAfter: '0' },
      {
        kind: 'message',
        content: [
          { type: 'tool_use', id: 'toolu_1', name: 'calculator', input: { expression: '2+2' } },
        ],
      },
      {
        kind: 'message',
        content: [{ type: 'text', text: 'It is four.', chunks: ['It is ', 'four.'] }],
      },
    );
    const call = new RelayingCall(client, relayedTurn, relayTo(api));
    expect((await call.ended).code).toBe(0);

    // Two model calls, both relayed, naming the agent and their steps; the harness's own
    // provider was never asked.
    const requests = call.of('modelRequest');
    expect(requests.map((r) => [r.step, r.agent])).toEqual([
      [1, 'triage'],
      [2, 'triage'],
    ]);
    expect(own.callCount).toBe(0);
    const second = modelRequestFromJson(requests[1]?.requestJson ?? '', 'request_json');
    expect(second.messages.at(-1)?.content[0]).toMatchObject({ type: 'tool_result', content: '4' });
    // The provider got the control plane's key (a 429 retried, then two answers).
    expect(api.requests.map((r) => r.headers.authorization)).toEqual(
      Array.from({ length: 3 }, () => `Bearer ${KEY}`),
    );
    // Fragments came down as model_deltas; the harness sends none back as text_delta.
    expect(call.of('textDelta')).toEqual([]);
    const result = call.of('result')[0]?.outcome;
    expect(result?.$case).toBe('complete');
    expect(result?.$case === 'complete' ? result.value.text : '').toBe('It is four.');
    // The configuration records the relayed model's parameters (Anthropic: no provider).
    const config = call.of('step').find((s) => s.step?.$case === 'agentConfig')?.step;
    const recorded =
      config?.$case === 'agentConfig'
        ? decodeAgentConfig(config.value.configJson).config
        : undefined;
    expect(recorded?.model).toEqual({ model: 'claude-relayed', maxTokens: 512 });
  });

  it("fails the turn with the control plane's failure, retryable as its code says", async () => {
    const { client } = await rig();
    const call = new RelayingCall(client, relayedTurn, (request, c) =>
      c.send({
        $case: 'modelAnswer',
        value: {
          step: request.step,
          thread: '',
          answer: {
            $case: 'failure',
            value: { code: 'unavailable', message: 'the provider is overloaded', retryable: true },
          },
        },
      }),
    );
    expect((await call.ended).code).toBe(0);
    const result = call.of('result')[0]?.outcome;
    expect(result?.$case).toBe('failed');
    expect(result?.$case === 'failed' ? result.value : undefined).toMatchObject({
      code: 'unavailable',
      retryable: true,
      message: expect.stringContaining('the provider is overloaded') as unknown,
    });
  });

  it('a cancel while the call is relayed ends the turn cancelled, and the call ends OK', async () => {
    const { client } = await rig();
    let asked: ModelRequestMessage | undefined;
    const call = new RelayingCall(client, relayedTurn, (request) => {
      asked = request;
    });
    for (let i = 0; i < 200 && asked === undefined; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const step = asked?.step ?? 0;
    expect(step).toBe(1);
    // The cancel, then the answer the control plane's model call produced meanwhile.
    call.send({ $case: 'cancel', value: { reason: 'the user left' } });
    call.send({ $case: 'modelDelta', value: { step, text: 'late', thread: '' } });
    call.send({
      $case: 'modelAnswer',
      value: { step, thread: '', answer: { $case: 'responseJson', value: '{}' } },
    });
    for (let i = 0; i < 200 && call.of('result').length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    call.stream.end();
    expect((await call.ended).code).toBe(0);
    expect(call.of('result')[0]?.outcome?.$case).toBe('cancelled');
  });

  it('ends the call INVALID_ARGUMENT when the control plane answers a step that was not relayed', async () => {
    const { client } = await rig();
    const call = new RelayingCall(client, relayedTurn, (request, c) =>
      c.send({
        $case: 'modelAnswer',
        value: {
          step: request.step + 6,
          thread: '',
          answer: { $case: 'responseJson', value: '{}' },
        },
      }),
    );
    const status = await call.ended;
    expect(status.code).toBe(3);
    expect(status.details).toContain('model_answer of step 7, which was not relayed');
    expect(call.of('result')).toEqual([]);
  });

  it('refuses a start whose relayed agent names no provider it knows', async () => {
    const { client } = await rig();
    const start = turnRequestToProto(relayedTurn);
    const stream = client.runTurn(metadata());
    stream.on('data', () => undefined);
    stream.on('error', () => undefined);
    const ended = new Promise<{ code: number; details: string }>((resolve) =>
      stream.on('status', resolve),
    );
    stream.write({
      input: {
        $case: 'start',
        value: { ...start, agent: { ...start.agent!, provider: 'gemini' } },
      },
    });
    const status = await ended;
    expect(status.code).toBe(3); // INVALID_ARGUMENT
    expect(status.details).toMatch(/start\.agent\.provider.*"gemini".*anthropic or openai/);
  });
});
