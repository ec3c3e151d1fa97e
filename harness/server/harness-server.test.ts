import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import {
  credentials,
  Metadata,
  status as GrpcStatus,
  type ClientDuplexStream,
} from '@grpc/grpc-js';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { Registry } from 'prom-client';
import { AppError, type ErrorDetails } from '../../common/errors';
import { createRootLogger } from '../../common/log';
import {
  HarnessClient,
  type Step,
  type TurnInput,
  type TurnOutput,
} from '../../proto/gen/polychrome/harness/v1/harness';
import { nodeEd25519Signer, nodeEd25519Verifier } from '../crypto/node-ed25519';
import { SCRIPTED_MODEL, ScriptedProvider, type ScriptReply } from '../model/scripted-provider';
import { decodeAgentConfig, hex } from '../turn/agent-config';
import { REPO_ROOT } from '../../test/support/mcp-servers/everything-http';
import { builtinToolRunner, builtinTools } from '../tools/builtin-tools';
import { type McpServerConfig } from '../tools/mcp-server-config';
import { McpToolRunner } from '../tools/mcp-tools';
import type { ToolRunner } from '../turn/ports/tool-port';
import { signApproval } from '../turn/approval-token';
import type { ApprovalAnswer, TurnTool } from '../turn/turn-records';
import type { ApprovalBinding, ApprovalScope } from '../../common/approval-bytes';
import {
  encodeHarnessCredential,
  HARNESS_CREDENTIAL_AUDIENCE,
  HARNESS_CREDENTIAL_METADATA,
} from '../../common/harness-credential';
import type { ApprovalRequest } from '../../proto/gen/polychrome/events/v1/events';
import { createHarnessMetrics } from './harness-metrics';
import { HarnessServer } from './harness-server';
import { testHarnessCertificate, testHarnessChannel } from '../../test/support/harness-tls';
import { createToolRouter } from './tool-router';
import { ERROR_CODE_METADATA, receivedErrorOf } from '../../common/grpc-errors';
import type { ToolReference } from './tool-spec-codec';
import { turnRequestToProto, type TurnRequest } from './turn-start-codec';
import { turnStepFromProto } from '../turn/step-codec';
import type { McpToolSource } from './turn-tools';

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const approvalKey = nodeEd25519Signer(new Uint8Array(32).fill(7));

const sendEmail: TurnTool = {
  name: 'send_email',
  description: 'Send an email.',
  inputSchema: { type: 'object' },
  effect: 'side_effect',
  needsApproval: false,
};
const refund: TurnTool = {
  name: 'refund_payment',
  description: 'Refund a payment.',
  inputSchema: { type: 'object' },
  effect: 'side_effect',
  needsApproval: true,
};
const charge: TurnTool = {
  name: 'charge_card',
  description: 'Charge a card on the control plane.',
  inputSchema: { type: 'object' },
  effect: 'side_effect',
  needsApproval: false,
  host: 'control_plane',
};
/** Pure; waits until its call is aborted. */
const waitForever: TurnTool = {
  name: 'wait_forever',
  description: 'Never answers.',
  inputSchema: { type: 'object' },
  effect: 'pure',
  needsApproval: false,
};

interface Rig {
  server: HarnessServer;
  /** The bound port on 127.0.0.1. */
  port: number;
  /** A client that dials as the control plane does: TLS, checking the namespace's name. */
  client: HarnessClient;
  model: ScriptedProvider;
  toolLog: string[];
  logLines: () => Record<string, unknown>[];
  registry: Registry;
  mcp?: McpToolRunner;
}

let current: Rig | undefined;

afterEach(async () => {
  current?.client.close();
  await current?.server.close();
  await current?.mcp?.close();
  current = undefined;
});

interface RigOptions {
  requireApproval?: string[];
  /** The conversation the pod was started for (the pod backend). */
  conversation?: string;
  /** The pod's namespace. @default 'team-a' */
  namespace?: string;
  /** The control plane's next key, during a rotation. */
  nextKey?: Uint8Array;
  ackTimeoutMs?: number;
  /**
   * Real MCP servers, wired as main.ts does: built-in tools by name, the rest to the MCP
   * runner, built-ins and reserved tools in the catalog, the runner as the MCP tool source.
   */
  mcpServers?: McpServerConfig[];
  /** Wraps the runner as the server's MCP tool source (to gate the listing). */
  mcpSource?: (runner: McpToolRunner) => McpToolSource;
}

async function rig(replies: ScriptReply[], options: RigOptions = {}): Promise<Rig> {
  const chunks: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString('utf8'));
      callback();
    },
  });
  const logger = createRootLogger({ service: 'harness', level: 'debug', destination });
  const model = new ScriptedProvider({ replies }, 'server-test');
  const toolLog: string[] = [];
  const tools: ToolRunner = {
    async call(request, { signal }) {
      toolLog.push(`run ${request.name} ${request.toolCallId}`);
      if (request.name === 'wait_forever') {
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
        toolLog.push(`aborted ${request.toolCallId}`);
        throw new AppError('cancelled', 'aborted');
      }
      if (request.name === 'send_email' || request.name === 'refund_payment') {
        return { content: `${request.name} done`, isError: false };
      }
      return builtinToolRunner.call(request, { signal, timeoutMs: 1000 });
    },
  };
  const registry = new Registry();
  const mcp = options.mcpServers === undefined ? undefined : new McpToolRunner(options.mcpServers);
  const namespace = options.namespace ?? 'team-a';
  const server = new HarnessServer({
    host: '127.0.0.1',
    port: 0,
    certificate: await testHarnessCertificate(namespace, logger),
    namespace,
    logger,
    metrics: createHarnessMetrics(registry),
    requireApproval: options.requireApproval ?? [],
    ...(options.conversation === undefined ? {} : { conversation: options.conversation }),
    ackTimeoutMs: options.ackTimeoutMs ?? 5_000,
    ...(mcp === undefined
      ? {}
      : {
          mcpTools: options.mcpSource?.(mcp) ?? mcp,
          toolCatalog: (name: string) => builtinTools.find((tool) => tool.name === name),
          // The MCP tests run tools for real, and MCP servers start slowly on shared cores.
          toolTimeoutMs: 20_000,
        }),
    deps: {
      modelFor: () => model,
      tools:
        mcp === undefined
          ? tools
          : createToolRouter(
              [
                {
                  names: new Set(builtinTools.map((tool) => tool.name)),
                  runner: builtinToolRunner,
                },
              ],
              mcp,
            ),
      approvalVerifier: nodeEd25519Verifier,
      approvalPublicKey: approvalKey.publicKey,
      ...(options.nextKey === undefined ? {} : { approvalNextPublicKey: options.nextKey }),
      clock: { nowMs: () => 1_000 },
    },
  });
  const port = await server.start();
  const channel = await testHarnessChannel(namespace);
  const client = new HarnessClient(`127.0.0.1:${port}`, channel.credentials, channel.options);
  const logLines = (): Record<string, unknown>[] =>
    chunks
      .join('')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => {
        const parsed: unknown = JSON.parse(line);
        return typeof parsed === 'object' && parsed !== null
          ? Object.fromEntries(Object.entries(parsed))
          : {};
      });
  current = {
    server,
    port,
    client,
    model,
    toolLog,
    logLines,
    registry,
    ...(mcp === undefined ? {} : { mcp }),
  };
  return current;
}

/** A model reply that asks for the pure `calculator` tool (so the turn goes on after it). */
const calculatorReply: ScriptReply = {
  content: [{ tool_use: { id: 'toolu_calc', name: 'calculator', input: { expression: '2+2' } } }],
};

function turnRequest(overrides: Partial<TurnRequest['input']> = {}, turnId = 't-1'): TurnRequest {
  return {
    conversationId: 'c-1',
    turnId,
    attempt: 1,
    model: '',
    input: {
      turnId,
      history: [],
      userMessage: 'hello',
      tools: [...builtinTools, sendEmail, refund, charge, waitForever],
      budget: {},
      recordedSteps: [],
      approvalAnswers: [],
      questionAnswers: [],
      ...overrides,
    },
  };
}

/** A scripted control plane on one call: acks steps unless told to hold them. */
class ControlPlaneCall {
  readonly outputs: TurnOutput[] = [];
  readonly stream: ClientDuplexStream<TurnInput, TurnOutput>;
  readonly status: Promise<{
    code: number;
    details: string;
    errorCode: string | undefined;
    errorDetails: ErrorDetails;
  }>;
  holdAcks = false;
  private nextPosition = 10;
  private readonly held: number[] = [];

  constructor(client: HarnessClient, metadata: Metadata, start?: TurnRequest) {
    this.stream = client.runTurn(metadata);
    this.stream.on('data', (output: TurnOutput) => {
      this.outputs.push(output);
      // As the control plane does: a step carried with the result gets no ack.
      if (output.output?.$case === 'step' && !output.output.value.commitWithResult) {
        // The configuration recorded first is acked at once: holding acks is about the turn's steps.
        const config = output.output.value.step?.$case === 'agentConfig';
        if (this.holdAcks && !config) this.held.push(output.output.value.sequence);
        else this.ack(output.output.value.sequence);
      }
      if (output.output?.$case === 'trustedToolCall') {
        this.send({
          input: {
            $case: 'trustedToolResult',
            value: {
              toolCallId: output.output.value.toolCallId,
              content: `charged by control plane (${output.output.value.argsJson})`,
              isError: false,
              outcomeUnknownReason: '',
            },
          },
        });
      }
    });
    this.stream.on('error', () => undefined);
    this.status = new Promise((resolve) => {
      this.stream.on('status', (s: { code: number; details: string; metadata: Metadata }) => {
        const [errorCode] = s.metadata.get(ERROR_CODE_METADATA);
        resolve({
          code: s.code,
          details: s.details,
          errorCode: typeof errorCode === 'string' ? errorCode : undefined,
          // What the control plane reads of it (common/grpc-errors.ts).
          errorDetails: receivedErrorOf(Object.assign(new Error(s.details), s)).details,
        });
      });
    });
    if (start !== undefined) {
      this.send({ input: { $case: 'start', value: turnRequestToProto(start) } });
    }
  }

  private outputsWithoutConfig(): TurnOutput[] {
    return this.outputs.filter(
      (o) => !(o.output?.$case === 'step' && o.output.value.step?.$case === 'agentConfig'),
    );
  }

  send(input: TurnInput): void {
    this.stream.write(input);
  }

  ack(sequence: number): void {
    this.send({
      input: { $case: 'stepCommitted', value: { sequence, position: this.nextPosition++ } },
    });
  }

  releaseAcks(): void {
    this.holdAcks = false;
    for (const sequence of this.held.splice(0)) this.ack(sequence);
  }

  /** The turn's steps; the agent_config recorded first is left out (see {@link configSteps}). */
  steps(): Step[] {
    return this.outputs.flatMap((o) =>
      o.output?.$case === 'step' && o.output.value.step?.$case !== 'agentConfig'
        ? [o.output.value]
        : [],
    );
  }

  /** The agent_config steps sent (docs/replay.md). */
  configSteps(): Step[] {
    return this.outputs.flatMap((o) =>
      o.output?.$case === 'step' && o.output.value.step?.$case === 'agentConfig'
        ? [o.output.value]
        : [],
    );
  }

  labels(): string[] {
    return this.outputsWithoutConfig().map((o) => {
      const out = o.output;
      switch (out?.$case) {
        case 'textDelta':
          return 'delta';
        case 'step':
          return `step ${out.value.step?.$case ?? '?'}`;
        case 'trustedToolCall':
          return `trusted ${out.value.toolName}`;
        case 'paused':
          return `paused ${out.value.request?.$case ?? '?'}`;
        case 'result':
          return `result ${out.value.outcome?.$case ?? '?'}`;
        default:
          return '?';
      }
    });
  }
}

const refundReply: ScriptReply = {
  content: [{ tool_use: { id: 'toolu_1', name: 'refund_payment', input: { order: 'A-1' } } }],
};

function bindingOf(request: ApprovalRequest): ApprovalBinding {
  return {
    requestId: request.requestId,
    toolName: request.toolName,
    argsSha256: new Uint8Array(request.argsSha256),
    decision: 'approved',
    turnId: request.turnId,
  };
}

/** The control plane's v2 answer for conversation c-1 (the rig's clock reads 1000). */
function answerFor(request: ApprovalRequest, scope: Partial<ApprovalScope> = {}): ApprovalAnswer {
  const full = { conversation: 'c-1', expiresAtMs: 60_000, approvalId: 'apv_1', ...scope };
  const binding = { ...bindingOf(request), scope: full };
  return {
    ...binding,
    ...signApproval(binding, approvalKey),
    answeredBy: 'web:alice',
    answeredAtMs: 900,
    comment: '',
  };
}

/** The approval request `call` paused on. */
function pausedRequest(call: ControlPlaneCall, status: { code: number }): ApprovalRequest {
  expect(status.code).toBe(GrpcStatus.OK);
  const paused = call.outputs.at(-1)?.output;
  if (paused?.$case !== 'paused' || paused.value.request?.$case !== 'approvalRequest') {
    throw new Error('expected an approval pause');
  }
  return paused.value.request.value;
}

function pausedRejection(call: ControlPlaneCall): string {
  const paused = call.outputs.at(-1)?.output;
  return paused?.$case === 'paused' ? paused.value.rejection : '';
}

/** The turn again, with `first`'s steps recorded and `answers`. */
function resumedWith(first: ControlPlaneCall, answers: ApprovalAnswer[]): TurnRequest {
  return turnRequest({
    recordedSteps: first.steps().map((step) => turnStepFromProto(step)),
    approvalAnswers: answers,
  });
}

/** A credential the control plane would mint for `conversation` (the rig's clock reads 1000). */
function credentialFor(conversation: string, exp = 60_000, namespace = 'team-a'): string {
  return encodeHarnessCredential(
    { aud: HARNESS_CREDENTIAL_AUDIENCE, conversation, namespace, iat: 900, exp },
    (message) => approvalKey.sign(message),
  );
}

function authFor(conversation: string): Metadata {
  const metadata = auth();
  metadata.set(HARNESS_CREDENTIAL_METADATA, credentialFor(conversation));
  return metadata;
}

function auth(traceparent = TRACEPARENT): Metadata {
  const metadata = new Metadata();
  metadata.set(HARNESS_CREDENTIAL_METADATA, credentialFor('c-1'));
  metadata.set('traceparent', traceparent);
  return metadata;
}

async function eventually(check: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Lets every queued callback and I/O event run, several times over. */
async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('HarnessServer over loopback gRPC', () => {
  it('streams text deltas, then the model_call step, then one complete result', async () => {
    const { client, registry } = await rig([{ text: 'Hello there, friend.' }]);
    const cp = new ControlPlaneCall(client, auth(), turnRequest());
    expect(await cp.status).toMatchObject({ code: GrpcStatus.OK });
    expect(cp.labels()).toEqual(['delta', 'delta', 'delta', 'step modelCall', 'result complete']);
    const deltas = cp.outputs.flatMap((o) =>
      o.output?.$case === 'textDelta' ? [o.output.value.text] : [],
    );
    expect(deltas.join('')).toBe('Hello there, friend.');
    const last = cp.outputs.at(-1)?.output;
    expect(last).toEqual({
      $case: 'result',
      value: {
        outcome: {
          $case: 'complete',
          value: {
            turnId: 't-1',
            text: 'Hello there, friend.',
            steps: 1,
            completedAtMs: 1_000,
            fallback: false,
          },
        },
      },
    });
    const metrics = await registry.metrics();
    expect(metrics).toContain('polychrome_harness_turns_total{outcome="completed"} 1');
    expect(metrics).toContain('polychrome_harness_steps_total{kind="model_call"} 1');
  });

  it('runs a side-effecting tool only after its tool_call is acked', async () => {
    const { client, toolLog } = await rig([
      { content: [{ tool_use: { id: 'toolu_1', name: 'send_email', input: { to: 'a@b.c' } } }] },
      { text: 'Sent.' },
    ]);
    const cp = new ControlPlaneCall(client, auth());
    cp.holdAcks = true;
    cp.send({ input: { $case: 'start', value: turnRequestToProto(turnRequest()) } });
    await eventually(() => cp.steps().length === 1, 'the model_call step');
    cp.releaseAcks();
    cp.holdAcks = true;
    await eventually(() => cp.steps().length === 2, 'the tool_call step');
    const toolCall = turnStepFromProto(cp.steps()[1]!);
    expect(toolCall).toMatchObject({
      kind: 'tool_call',
      record: { toolName: 'send_email', effect: 'side_effect' },
    });
    await settle();
    expect(toolLog).toEqual([]);
    cp.releaseAcks();
    expect(await cp.status).toMatchObject({ code: GrpcStatus.OK });
    expect(toolLog).toEqual(['run send_email toolu_1']);
    expect(cp.labels().filter((l) => !l.startsWith('delta'))).toEqual([
      'step modelCall',
      'step toolCall',
      'step toolResult',
      'step modelCall',
      'result complete',
    ]);
  });

  it('refuses plaintext: a client without TLS never reaches the service', async () => {
    const { port, model, server } = await rig([{ text: 'never' }]);
    const plain = new HarnessClient(`127.0.0.1:${port}`, credentials.createInsecure());
    try {
      const cp = new ControlPlaneCall(plain, auth(), turnRequest());
      expect(await cp.status).toMatchObject({ code: GrpcStatus.UNAVAILABLE });
      expect(cp.outputs).toEqual([]);
      expect(model.callCount).toBe(0);
      expect(server.currentTurn()).toBeUndefined();
    } finally {
      plain.close();
    }
  });

  it("is refused by a client that dials another namespace's harness: its certificate names team-a only", async () => {
    const { port, model, server } = await rig([{ text: 'never' }]);
    const channel = await testHarnessChannel('team-b');
    const other = new HarnessClient(`127.0.0.1:${port}`, channel.credentials, channel.options);
    try {
      const cp = new ControlPlaneCall(other, authFor('c-1'), turnRequest());
      const status = await cp.status;
      expect(status).toMatchObject({ code: GrpcStatus.UNAVAILABLE });
      expect(status.details).toMatch(/polychrome-harness\.team-b/);
      expect(model.callCount).toBe(0);
      expect(server.currentTurn()).toBeUndefined();
    } finally {
      other.close();
    }
  });

  it.each<[string, string | undefined, RegExp]>([
    ['no credential', undefined, /the call carries none/],
    [
      'a credential signed by another key (forged)',
      encodeHarnessCredential(
        {
          aud: HARNESS_CREDENTIAL_AUDIENCE,
          conversation: 'c-1',
          namespace: 'team-a',
          iat: 900,
          exp: 60_000,
        },
        (message) => nodeEd25519Signer(new Uint8Array(32).fill(9)).sign(message),
      ),
      /not signed by a key this harness trusts/,
    ],
    ['an expired credential', credentialFor('c-1', 1_000), /the credential expired at/],
    [
      'a credential for another audience',
      encodeHarnessCredential(
        {
          aud: 'polychrome-state',
          conversation: 'c-1',
          namespace: 'team-a',
          iat: 900,
          exp: 60_000,
        },
        (message) => approvalKey.sign(message),
      ),
      /for audience polychrome-state, not polychrome-harness/,
    ],
    ['a credential that is not one', 'Bearer conversation-token-1', /not in the phc1 format/],
  ])(
    'rejects a call with %s with UNAUTHENTICATED, and binds nothing',
    async (_label, credential, reason) => {
      const { client, model, server } = await rig([{ text: 'never' }, { text: 'c-2 runs' }]);
      const metadata = auth();
      metadata.remove(HARNESS_CREDENTIAL_METADATA);
      if (credential !== undefined) metadata.set(HARNESS_CREDENTIAL_METADATA, credential);
      const cp = new ControlPlaneCall(client, metadata, turnRequest());
      const status = await cp.status;
      expect(status).toMatchObject({
        code: GrpcStatus.UNAUTHENTICATED,
        errorCode: 'unauthenticated',
      });
      expect(status.details).toMatch(reason);
      expect(model.callCount).toBe(0);
      expect(server.currentTurn()).toBeUndefined();
      // The refused call bound nothing: another conversation's valid call still runs.
      const other = new ControlPlaneCall(client, authFor('c-2'), {
        ...turnRequest(),
        conversationId: 'c-2',
      });
      expect((await other.status).code).toBe(GrpcStatus.OK);
    },
  );

  it("serves one conversation: after A's turn, B's credential is refused with PERMISSION_DENIED naming both", async () => {
    const { client, model } = await rig([{ text: 'for A' }, { text: 'never' }]);
    const a = new ControlPlaneCall(client, auth(), turnRequest());
    expect((await a.status).code).toBe(GrpcStatus.OK);
    const b = new ControlPlaneCall(client, authFor('c-2'), {
      ...turnRequest(),
      conversationId: 'c-2',
    });
    const status = await b.status;
    expect(status).toMatchObject({
      code: GrpcStatus.PERMISSION_DENIED,
      errorCode: 'permission_denied',
    });
    expect(status.details).toBe(
      'this harness serves conversation c-1 only and refuses conversation c-2; send the turn to the harness of conversation c-2',
    );
    expect(model.callCount).toBe(1);
  });

  it("refuses A's credential on B's harness (bound at start by the pod backend)", async () => {
    const { client, model } = await rig([{ text: 'never' }], { conversation: 'c-2' });
    const a = new ControlPlaneCall(client, auth(), turnRequest());
    const status = await a.status;
    expect(status.code).toBe(GrpcStatus.PERMISSION_DENIED);
    expect(status.details).toContain('serves conversation c-2 only and refuses conversation c-1');
    expect(model.callCount).toBe(0);
  });

  it('refuses a credential for a conversation of another namespace when it knows its own', async () => {
    const { client, model } = await rig([{ text: 'never' }], { namespace: 'team-b' });
    const cp = new ControlPlaneCall(client, auth(), turnRequest());
    const status = await cp.status;
    expect(status.code).toBe(GrpcStatus.PERMISSION_DENIED);
    expect(status.details).toContain(
      'this harness runs in namespace team-b and refuses a credential for conversation c-1 of namespace team-a',
    );
    expect(model.callCount).toBe(0);
  });

  it('rotation: with the next key configured, credentials and approvals signed by either key pass; without it, the new key is refused', async () => {
    const nextKey = nodeEd25519Signer(new Uint8Array(32).fill(11));
    const signedByNext = (): Metadata => {
      const metadata = auth();
      metadata.set(
        HARNESS_CREDENTIAL_METADATA,
        encodeHarnessCredential(
          {
            aud: HARNESS_CREDENTIAL_AUDIENCE,
            conversation: 'c-1',
            namespace: 'team-a',
            iat: 900,
            exp: 60_000,
          },
          (message) => nextKey.sign(message),
        ),
      );
      return metadata;
    };
    const { client, toolLog } = await rig([refundReply, { text: 'Refunded.' }], {
      nextKey: nextKey.publicKey,
    });
    // Old key (still the control plane's) and new key both open the harness.
    const first = new ControlPlaneCall(client, auth(), turnRequest());
    const request = pausedRequest(first, await first.status);
    const binding = {
      ...bindingOf(request),
      scope: { conversation: 'c-1', expiresAtMs: 60_000, approvalId: 'apv_n' },
    };
    const answer = {
      ...answerFor(request),
      ...signApproval(binding, nextKey),
      scope: binding.scope,
    };
    const second = new ControlPlaneCall(client, signedByNext(), resumedWith(first, [answer]));
    expect((await second.status).code).toBe(GrpcStatus.OK);
    expect(toolLog).toEqual(['run refund_payment toolu_1']);
    current?.client.close();
    await current?.server.close();
    // A harness that was not given the next key refuses what it signs.
    const old = await rig([{ text: 'never' }]);
    const refused = new ControlPlaneCall(old.client, signedByNext(), turnRequest());
    const status = await refused.status;
    expect(status.code).toBe(GrpcStatus.UNAUTHENTICATED);
    expect(status.details).toContain('not signed by a key this harness trusts');
  });

  it("refuses a start naming another conversation than the call's credential", async () => {
    const { client, model } = await rig([{ text: 'never' }]);
    const cp = new ControlPlaneCall(client, auth(), { ...turnRequest(), conversationId: 'c-2' });
    const status = await cp.status;
    expect(status.code).toBe(GrpcStatus.PERMISSION_DENIED);
    expect(status.details).toContain(
      "the call's credential is for conversation c-1, but its start names conversation c-2",
    );
    expect(model.callCount).toBe(0);
  });

  it('refuses a second concurrent turn, naming the running one', async () => {
    // A first reply that calls a tool: its model_call waits for an ack, holding the turn.
    const { client } = await rig([calculatorReply, { text: 'first' }]);
    const first = new ControlPlaneCall(client, auth());
    first.holdAcks = true;
    first.send({ input: { $case: 'start', value: turnRequestToProto(turnRequest()) } });
    await eventually(() => first.steps().length === 1, 'the first turn to send a step');
    const second = new ControlPlaneCall(client, auth(), turnRequest({}, 't-2'));
    const status = await second.status;
    expect(status).toMatchObject({
      code: GrpcStatus.FAILED_PRECONDITION,
      errorCode: 'failed_precondition',
      // The control plane calls again only a harness that names the turn it runs
      // (operator/turns/harness-run.ts retryWhileBusy).
      errorDetails: { runningTurn: 't-1', conversation: 'c-1' },
    });
    expect(status.details).toBe(
      'the harness is running turn t-1 (attempt 1) of conversation c-1; it runs one turn at a time, so wait for that call to end',
    );
    first.releaseAcks();
    expect(await first.status).toMatchObject({ code: GrpcStatus.OK });
  });

  it('aborts the turn and its tool call when the client cancels the call', async () => {
    const { client, toolLog, server } = await rig([
      { content: [{ tool_use: { id: 'toolu_1', name: 'wait_forever', input: {} } }] },
    ]);
    const cp = new ControlPlaneCall(client, auth(), turnRequest());
    await eventually(() => toolLog.includes('run wait_forever toolu_1'), 'the tool to start');
    expect(server.currentTurn()).toEqual({ conversationId: 'c-1', turnId: 't-1', attempt: 1 });
    cp.stream.cancel();
    expect((await cp.status).code).toBe(GrpcStatus.CANCELLED);
    await eventually(() => toolLog.includes('aborted toolu_1'), 'the tool to see the abort');
    await eventually(() => server.currentTurn() === undefined, 'the turn slot to free');
  });

  it('ends with a cancelled result when the control plane sends cancel', async () => {
    const { client, toolLog } = await rig([
      { content: [{ tool_use: { id: 'toolu_1', name: 'wait_forever', input: {} } }] },
    ]);
    const cp = new ControlPlaneCall(client, auth(), turnRequest());
    await eventually(() => toolLog.includes('run wait_forever toolu_1'), 'the tool to start');
    cp.send({ input: { $case: 'cancel', value: { reason: 'user pressed stop' } } });
    expect((await cp.status).code).toBe(GrpcStatus.OK);
    expect(cp.outputs.at(-1)?.output).toEqual({
      $case: 'result',
      value: { outcome: { $case: 'cancelled', value: { reason: 'user pressed stop' } } },
    });
    expect(toolLog).toContain('aborted toolu_1');
  });

  it('pauses for approval, then a new call with the signed answer resumes the turn', async () => {
    const { client, toolLog, model } = await rig([
      {
        content: [{ tool_use: { id: 'toolu_1', name: 'refund_payment', input: { order: 'A-1' } } }],
      },
      { text: 'Refunded.' },
    ]);
    const first = new ControlPlaneCall(client, auth(), turnRequest());
    expect((await first.status).code).toBe(GrpcStatus.OK);
    expect(first.labels()).toEqual(['step modelCall', 'paused approvalRequest']);
    const paused = first.outputs.at(-1)?.output;
    if (paused?.$case !== 'paused' || paused.value.request?.$case !== 'approvalRequest') {
      throw new Error('expected an approval pause');
    }
    const request = paused.value.request.value;
    expect(request).toMatchObject({
      turnId: 't-1',
      toolCallId: 'toolu_1',
      toolName: 'refund_payment',
      argsJson: '{"order":"A-1"}',
    });
    expect(toolLog).toEqual([]);

    const resumed = resumedWith(first, [answerFor(request)]);
    const second = new ControlPlaneCall(client, auth(), resumed);
    expect((await second.status).code).toBe(GrpcStatus.OK);
    expect(second.labels().filter((l) => l !== 'delta')).toEqual([
      'step toolCall',
      'step toolResult',
      'step modelCall',
      'result complete',
    ]);
    expect(turnStepFromProto(second.steps()[0]!)).toMatchObject({
      kind: 'tool_call',
      record: { toolName: 'refund_payment', approvalRequestId: request.requestId },
    });
    expect(toolLog).toEqual(['run refund_payment toolu_1']);
    // The recorded model call was reused, not asked again.
    expect(model.callCount).toBe(2);
  });

  it.each<[string, (request: ApprovalRequest) => ApprovalAnswer, RegExp]>([
    [
      'signed for another conversation',
      (r) => answerFor(r, { conversation: 'c-2' }),
      /answer is for conversation c-2, not c-1 \(replayed from another conversation\)/,
    ],
    [
      'expired',
      (r) => answerFor(r, { expiresAtMs: 1_000 }),
      /answer apv_1 expired at 1970-01-01T00:00:01.000Z; answer the approval again/,
    ],
    [
      'in the v1 format',
      (r) => ({ ...answerFor(r), ...signApproval(bindingOf(r), approvalKey), scope: undefined }),
      /answer is in approval format v1/,
    ],
    [
      'with a scope other than the one signed',
      (r) => ({
        ...answerFor(r),
        scope: { conversation: 'c-1', expiresAtMs: 9e12, approvalId: 'apv_9' },
      }),
      /does not verify with the approval key \(forged\)/,
    ],
  ])(
    'refuses an answer %s: the call does not run, the turn pauses again saying why',
    async (_name, make, reason) => {
      const { client, toolLog } = await rig([refundReply]);
      const first = new ControlPlaneCall(client, auth(), turnRequest());
      const request = pausedRequest(first, await first.status);
      const second = new ControlPlaneCall(client, auth(), resumedWith(first, [make(request)]));
      expect((await second.status).code).toBe(GrpcStatus.OK);
      expect(second.labels()).toEqual(['paused approvalRequest']);
      expect(pausedRejection(second)).toMatch(reason);
      expect(toolLog).toEqual([]);
    },
  );

  it('uses an approval once: the same answer again (history without its tool_call) is refused as a replay', async () => {
    const { client, toolLog } = await rig([refundReply, { text: 'Refunded.' }]);
    const first = new ControlPlaneCall(client, auth(), turnRequest());
    const request = pausedRequest(first, await first.status);
    const answer = answerFor(request);
    const second = new ControlPlaneCall(client, auth(), resumedWith(first, [answer]));
    expect((await second.status).code).toBe(GrpcStatus.OK);
    expect(toolLog).toEqual(['run refund_payment toolu_1']);
    // The attacker's replay: the history stops before the tool_call, the answer is the same.
    const replay = new ControlPlaneCall(client, auth(), resumedWith(first, [answer]));
    expect((await replay.status).code).toBe(GrpcStatus.OK);
    expect(replay.labels()).toEqual(['paused approvalRequest']);
    expect(pausedRejection(replay)).toMatch(
      /answer apv_1 was already used \(replayed\); each approval runs its call once/,
    );
    expect(toolLog).toEqual(['run refund_payment toolu_1']);
  });

  it('applies the deployment requireApproval list on top of start', async () => {
    const { client, toolLog } = await rig(
      [{ content: [{ tool_use: { id: 'toolu_1', name: 'send_email', input: {} } }] }],
      { requireApproval: ['send_email'] },
    );
    const cp = new ControlPlaneCall(client, auth(), turnRequest());
    expect((await cp.status).code).toBe(GrpcStatus.OK);
    expect(cp.labels()).toEqual(['step modelCall', 'paused approvalRequest']);
    expect(toolLog).toEqual([]);
  });

  it('proxies a control-plane tool through trusted_tool_call after committing its tool_call', async () => {
    const { client, toolLog } = await rig([
      { content: [{ tool_use: { id: 'toolu_1', name: 'charge_card', input: { cents: 500 } } }] },
      { text: 'Charged.' },
    ]);
    const cp = new ControlPlaneCall(client, auth(), turnRequest());
    expect((await cp.status).code).toBe(GrpcStatus.OK);
    expect(cp.labels().filter((l) => l !== 'delta')).toEqual([
      'step modelCall',
      'step toolCall',
      'trusted charge_card',
      'step toolResult',
      'step modelCall',
      'result complete',
    ]);
    expect(turnStepFromProto(cp.steps()[2]!)).toMatchObject({
      kind: 'tool_result',
      record: { content: 'charged by control plane ({"cents":500})', isError: false },
    });
    expect(toolLog).toEqual([]);
  });

  it('puts the traceparent and the turn ids on the turn log context', async () => {
    const { client, logLines } = await rig([{ text: 'ok' }]);
    const cp = new ControlPlaneCall(client, auth(), turnRequest());
    expect((await cp.status).code).toBe(GrpcStatus.OK);
    const started = logLines().find((line) => line.msg === 'turn started');
    expect(started).toMatchObject({
      component: 'turn',
      conversation: 'c-1',
      turn: 't-1',
      attempt: 1,
      traceparent: TRACEPARENT,
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    });
    expect(logLines().find((line) => line.msg === 'turn ended')).toMatchObject({
      traceparent: TRACEPARENT,
      outcome: 'completed',
    });
  });

  it('refuses a call whose first message is not start with INVALID_ARGUMENT', async () => {
    const { client } = await rig([]);
    const cp = new ControlPlaneCall(client, auth());
    cp.send({ input: { $case: 'stepCommitted', value: { sequence: 1, position: 0 } } });
    expect(await cp.status).toMatchObject({
      code: GrpcStatus.INVALID_ARGUMENT,
      details: 'the first message of a call must be start',
    });
  });

  it('sends the reply that ends the turn with the result, waiting for no ack; earlier steps wait', async () => {
    const { client } = await rig([calculatorReply, { text: 'four' }]);
    const cp = new ControlPlaneCall(client, auth(), turnRequest());
    expect(await cp.status).toMatchObject({ code: GrpcStatus.OK });
    expect(cp.steps().map((step) => [step.step?.$case, step.commitWithResult])).toEqual([
      ['modelCall', false],
      ['toolCall', false],
      ['toolResult', false],
      ['modelCall', true],
    ]);
    // Nothing after the carried step but the result.
    expect(cp.labels().slice(-2)).toEqual(['step modelCall', 'result complete']);
  });

  it('records its configuration first, with the provider parameters, and names it on the model call', async () => {
    const { client } = await rig([{ text: 'hi' }, { text: 'hi again' }]);
    const cp = new ControlPlaneCall(client, auth(), turnRequest());
    expect(await cp.status).toMatchObject({ code: GrpcStatus.OK });
    const [config] = cp.configSteps();
    expect(cp.configSteps()).toHaveLength(1);
    expect(config?.sequence).toBe(1);
    const record = turnStepFromProto(config!);
    if (record.kind !== 'agent_config') throw new Error('not an agent_config');
    const decoded = decodeAgentConfig(record.record.configJson);
    expect(decoded.config.model).toEqual({ model: SCRIPTED_MODEL, maxTokens: 0 });
    expect(decoded.config.tools.map((t) => t.name)).toContain('send_email');
    const call = turnStepFromProto(cp.steps()[0]!);
    if (call.kind !== 'model_call') throw new Error('not a model_call');
    expect(hex(call.record.configSha256 ?? new Uint8Array())).toBe(hex(record.record.sha256));
    expect(call.record.requestSha256).toHaveLength(32);

    // The control plane says the journal holds it: it is not recorded again.
    const next = new ControlPlaneCall(
      client,
      auth(),
      turnRequest({ recordedConfigSha256: hex(record.record.sha256) }, 't-2'),
    );
    expect(await next.status).toMatchObject({ code: GrpcStatus.OK });
    expect(next.configSteps()).toEqual([]);
  });

  it('fails the call with DEADLINE_EXCEEDED when an ack never comes', async () => {
    const { client, server } = await rig([calculatorReply, { text: 'slow journal' }], {
      ackTimeoutMs: 100,
    });
    const cp = new ControlPlaneCall(client, auth());
    cp.holdAcks = true;
    cp.send({ input: { $case: 'start', value: turnRequestToProto(turnRequest()) } });
    const status = await cp.status;
    expect(status).toMatchObject({
      code: GrpcStatus.DEADLINE_EXCEEDED,
      errorCode: 'deadline_exceeded',
    });
    expect(status.details).toContain('did not ack step 2 (model_call) in time');
    await eventually(() => server.currentTurn() === undefined, 'the turn slot to free');
  });

  it('drains: a running turn gets a cancelled result, new calls get UNAVAILABLE', async () => {
    const { client, toolLog, server } = await rig([
      { content: [{ tool_use: { id: 'toolu_1', name: 'wait_forever', input: {} } }] },
    ]);
    const cp = new ControlPlaneCall(client, auth(), turnRequest());
    await eventually(() => toolLog.includes('run wait_forever toolu_1'), 'the tool to start');
    const drained = server.drain(50);
    expect(server.isServing()).toBe(false);
    const late = new ControlPlaneCall(client, auth(), turnRequest({}, 't-9'));
    expect((await late.status).code).toBe(GrpcStatus.UNAVAILABLE);
    expect((await cp.status).code).toBe(GrpcStatus.OK);
    expect(cp.outputs.at(-1)?.output).toEqual({
      $case: 'result',
      value: { outcome: { $case: 'cancelled', value: { reason: 'the harness is shutting down' } } },
    });
    await drained;
  });
});

describe('HarnessServer with the harness MCP servers (real stdio server)', () => {
  // Each runner starts node + tsx for the server: slow on shared cores.
  const SLOW = 30_000;
  const flaky: McpServerConfig = {
    name: 'flaky',
    transport: 'stdio',
    command: process.execPath,
    args: [
      '--import',
      'tsx',
      join(REPO_ROOT, 'test', 'support', 'mcp-servers', 'failure-server.ts'),
    ],
    cwd: REPO_ROOT,
    timeoutMs: 20_000,
  };
  const ghost: McpServerConfig = {
    name: 'ghost',
    transport: 'stdio',
    command: join(REPO_ROOT, 'no-such-mcp-server'),
  };
  const flakyTools = [
    'flaky/echo',
    'flaky/write_note',
    'flaky/crash',
    'flaky/slow',
    'flaky/cancellations',
    'flaky/fail',
    'flaky/throws',
  ];

  /** What the coordinator sends: the built-ins by reference, plus `tools` in full. */
  function mcpTurn(
    references: ToolReference[] = [],
    turnId = 't-1',
    tools: TurnTool[] = [],
  ): TurnRequest {
    return {
      ...turnRequest({ tools }, turnId),
      toolReferences: [
        ...builtinTools.map((tool) => ({ name: tool.name, needsApproval: false })),
        ...references,
      ],
    };
  }

  function offered(model: ScriptedProvider, request = 0): string[] {
    return model.requests[request]?.tools.map((tool) => tool.name) ?? [];
  }

  it(
    "offers the servers' tools beside the built-ins and runs them, pure only when read-only",
    async () => {
      const { client, model } = await rig(
        [
          { content: [{ tool_use: { id: 'toolu_1', name: 'flaky/echo', input: { text: 'hi' } } }] },
          {
            content: [
              { tool_use: { id: 'toolu_2', name: 'flaky/write_note', input: { text: 'n1' } } },
            ],
          },
          { text: 'Done.' },
        ],
        { mcpServers: [flaky] },
      );
      const cp = new ControlPlaneCall(client, auth(), mcpTurn());
      expect((await cp.status).code).toBe(GrpcStatus.OK);
      expect(offered(model)).toEqual([...builtinTools.map((tool) => tool.name), ...flakyTools]);
      const steps = cp.steps().map((step) => turnStepFromProto(step));
      expect(
        steps.flatMap((s) =>
          s.kind === 'tool_call' ? [[s.record.toolName, s.record.effect]] : [],
        ),
      ).toEqual([
        ['flaky/echo', 'pure'],
        ['flaky/write_note', 'side_effect'],
      ]);
      expect(
        steps.flatMap((s) =>
          s.kind === 'tool_result' ? [[s.record.content, s.record.isError]] : [],
        ),
      ).toEqual([
        ['hi', false],
        ['saved note 1', false],
      ]);
      expect(cp.labels().at(-1)).toBe('result complete');
    },
    SLOW,
  );

  it(
    "lists once for the harness's life, and again after the server reconnects",
    async () => {
      const listings = jest.spyOn(McpClient.prototype, 'listTools');
      try {
        const { client, model } = await rig(
          [
            { text: 'one' },
            { text: 'two' },
            { content: [{ tool_use: { id: 'toolu_c', name: 'flaky/crash', input: {} } }] },
            { text: 'four' },
          ],
          { mcpServers: [flaky] },
        );
        const run = async (turnId: string): Promise<ControlPlaneCall> => {
          const cp = new ControlPlaneCall(client, auth(), mcpTurn([], turnId));
          expect((await cp.status).code).toBe(GrpcStatus.OK);
          return cp;
        };
        await run('t-1');
        expect(listings).toHaveBeenCalledTimes(1);
        await run('t-2');
        expect(listings).toHaveBeenCalledTimes(1);
        // The server dies mid-call: the side-effecting call's outcome is unknown.
        expect((await run('t-3')).labels().at(-1)).toBe('result ambiguous');
        expect(listings).toHaveBeenCalledTimes(1);
        // The next turn starts a fresh server, which is listed again.
        await run('t-4');
        expect(listings).toHaveBeenCalledTimes(2);
        expect(
          model.requests.map((r) => r.tools.filter((t) => t.name.startsWith('flaky/'))),
        ).toEqual(
          [0, 1, 2, 3].map(() => flakyTools.map((name) => expect.objectContaining({ name }))),
        );
      } finally {
        listings.mockRestore();
      }
    },
    SLOW,
  );

  it(
    'leaves out a server that cannot be listed, logs why, and runs the turn with the rest',
    async () => {
      const { client, model, logLines } = await rig(
        [
          {
            content: [
              { tool_use: { id: 'toolu_1', name: 'flaky/echo', input: { text: 'still here' } } },
              { tool_use: { id: 'toolu_2', name: 'calculator', input: { expression: '2 + 3' } } },
            ],
          },
          { text: 'Both worked.' },
        ],
        { mcpServers: [ghost, flaky] },
      );
      const cp = new ControlPlaneCall(
        client,
        auth(),
        mcpTurn([{ name: 'ghost/anything', needsApproval: true }]),
      );
      expect((await cp.status).code).toBe(GrpcStatus.OK);
      expect(offered(model)).toEqual([...builtinTools.map((tool) => tool.name), ...flakyTools]);
      expect(
        cp
          .steps()
          .map((step) => turnStepFromProto(step))
          .flatMap((s) => (s.kind === 'tool_result' ? [s.record.content] : []))
          // Results are committed as they settle, in either order.
          .sort(),
      ).toEqual(['5', 'still here']);
      expect(cp.labels().at(-1)).toBe('result complete');
      const leftOut = logLines().find(
        (line) => line.msg === 'MCP server left out of this turn: its tools could not be listed',
      );
      expect(leftOut).toMatchObject({ server: 'ghost', turn: 't-1', conversation: 'c-1' });
      expect(leftOut?.reason).toMatch(/^MCP server ghost could not be started: /u);
      expect(
        logLines().find(
          (line) =>
            line.msg ===
            'tool named by reference left out of this turn: no listed MCP server has it',
        ),
      ).toMatchObject({ tool: 'ghost/anything', turn: 't-1' });
      expect(logLines().find((line) => line.msg === 'turn started')).toMatchObject({
        mcpTools: flakyTools.length,
        tools: builtinTools.length + flakyTools.length,
      });
    },
    SLOW,
  );

  it.each<[string, string[], ToolReference[], string | undefined]>([
    ['a deployment rule naming the tool', ['flaky/write_note'], [], undefined],
    ['a deployment rule naming its server', ['flaky/*'], [], undefined],
    [
      'a by-reference entry from the control plane',
      [],
      [{ name: 'flaky/write_note', needsApproval: true, approvalReason: 'Notes are permanent.' }],
      'Notes are permanent.',
    ],
  ])(
    '%s makes the MCP tool wait for approval',
    async (_label, requireApproval, references, reason) => {
      const { client } = await rig(
        [
          {
            content: [
              { tool_use: { id: 'toolu_1', name: 'flaky/write_note', input: { text: 'x' } } },
            ],
          },
        ],
        { mcpServers: [flaky], requireApproval },
      );
      const cp = new ControlPlaneCall(client, auth(), mcpTurn(references));
      expect((await cp.status).code).toBe(GrpcStatus.OK);
      expect(cp.labels()).toEqual(['step modelCall', 'paused approvalRequest']);
      const paused = cp.outputs.at(-1)?.output;
      if (paused?.$case !== 'paused' || paused.value.request?.$case !== 'approvalRequest') {
        throw new Error('expected an approval pause');
      }
      expect(paused.value.request.value).toMatchObject({
        toolName: 'flaky/write_note',
        argsJson: '{"text":"x"}',
      });
      if (reason !== undefined) expect(paused.value.request.value.reason).toBe(reason);
    },
    SLOW,
  );

  it(
    'a full spec from the control plane wins over an MCP tool of the same name',
    async () => {
      const hostedEcho: TurnTool = {
        name: 'flaky/echo',
        description: 'Echo, hosted on the control plane.',
        inputSchema: { type: 'object' },
        effect: 'side_effect',
        needsApproval: false,
        host: 'control_plane',
      };
      const { client, model } = await rig(
        [
          { content: [{ tool_use: { id: 'toolu_1', name: 'flaky/echo', input: { text: 'x' } } }] },
          { text: 'ok' },
        ],
        { mcpServers: [flaky] },
      );
      const cp = new ControlPlaneCall(client, auth(), mcpTurn([], 't-1', [hostedEcho]));
      expect((await cp.status).code).toBe(GrpcStatus.OK);
      expect(cp.labels().filter((l) => l !== 'delta')).toEqual([
        'step modelCall',
        'step toolCall',
        'trusted flaky/echo',
        'step toolResult',
        'step modelCall',
        'result complete',
      ]);
      const echoes = model.requests[0]?.tools.filter((tool) => tool.name === 'flaky/echo');
      expect(echoes).toEqual([
        expect.objectContaining({ description: 'Echo, hosted on the control plane.' }),
      ]);
    },
    SLOW,
  );

  it(
    'claims the turn slot before listing: a second call is refused, a cancel ends the turn',
    async () => {
      let release = (): void => undefined;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let listings = 0;
      const { client, server, model, logLines } = await rig([{ text: 'never' }], {
        mcpServers: [flaky],
        mcpSource: (runner) => ({
          serverNames: runner.serverNames,
          listToolsByServer: async (signal) => {
            listings++;
            await gate;
            return runner.listToolsByServer(signal);
          },
        }),
      });
      const first = new ControlPlaneCall(client, auth(), mcpTurn());
      await eventually(() => listings === 1, 'the first turn to start listing');
      expect(server.currentTurn()).toEqual({ conversationId: 'c-1', turnId: 't-1', attempt: 1 });
      const second = new ControlPlaneCall(client, auth(), mcpTurn([], 't-2'));
      expect(await second.status).toMatchObject({ code: GrpcStatus.FAILED_PRECONDITION });
      first.send({ input: { $case: 'cancel', value: { reason: 'user pressed stop' } } });
      await eventually(
        () => logLines().some((line) => line.msg === 'turn cancel received'),
        'the cancel to arrive',
      );
      release();
      expect((await first.status).code).toBe(GrpcStatus.OK);
      expect(first.outputs.at(-1)?.output).toEqual({
        $case: 'result',
        value: { outcome: { $case: 'cancelled', value: { reason: 'user pressed stop' } } },
      });
      expect(model.callCount).toBe(0);
      expect(listings).toBe(1);
      expect(logLines().some((line) => String(line.msg).includes('left out'))).toBe(false);
    },
    SLOW,
  );
});
