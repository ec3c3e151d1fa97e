/**
 * The real turn coordinator (operator/turns/coordinator.ts) over in-memory ports, for
 * tests that need turns without a cluster: the real JournalStore in a temporary directory
 * ({@link StoreJournal}), the real harness gRPC server with the scripted model, reached
 * through the real {@link HarnessConnector} ({@link startScriptedHarness}), a real
 * ed25519 approval key, and Conversations and Leases held in memory as data
 * ({@link InMemoryConversations}, {@link InMemoryLeases}). Every turn rule is the
 * coordinator's own.
 */
import { generateKeyPairSync } from 'node:crypto';
import type { Logger } from 'pino';
import type { ScriptReply } from '../../harness/model/scripted-provider';
import type { ConversationSpec } from '../../operator/api/v1alpha1/conversation-spec';
import { ApprovalSigner } from '../../operator/turns/approval-signer';
import { TurnCoordinator } from '../../operator/turns/coordinator';
import { type TurnCoordinatorOptions } from '../../operator/turns/coordinator-options';
import { HarnessCredentialMinter } from '../../operator/turns/harness-credentials';
import { HarnessConnector } from '../../operator/turns/harness-client';
import type { Caller } from '../../operator/turns/turn-service';
import type { JsonObject } from '../../common/canonical-json';
import type { JournalEntry } from '../../common/state-journal';
import { InMemoryConversations, readyStatus } from './in-memory-conversations';
import { InMemoryLeases } from './in-memory-leases';
import {
  startScriptedHarness,
  type ScriptedHarness,
  type ScriptedHarnessOptions,
} from './scripted-harness';
import { StoreJournal } from './store-journal';
import { testHarnessCa } from './harness-tls';

/** The default spec of created and added conversations: the calculator, behind an approval. */
export const TEST_CONVERSATION_SPEC: ConversationSpec = {
  agent: { systemPrompt: 'You are a test agent.' },
  tools: { builtin: ['calculator'], requireApproval: ['calculator'] },
};

export interface RealTurns {
  readonly coordinator: TurnCoordinator;
  readonly journal: StoreJournal;
  readonly conversations: InMemoryConversations;
  readonly leases: InMemoryLeases;
  readonly harness: ScriptedHarness;
  readonly approvals: ApprovalSigner;
  /** Closes the coordinator, the harness (server and channels) and the store. */
  close(): Promise<void>;
}

export interface RealTurnsOptions {
  /** What the scripted model answers, call by call. */
  readonly replies: readonly ScriptReply[];
  readonly logger: Logger;
  /** Over {@link TEST_CONVERSATION_SPEC}. */
  readonly spec?: Partial<ConversationSpec>;
  /**
   * Identities linked to admin personas, as the records would answer
   * `FindPersonaByIdentity` (data only: the coordinator applies the rules).
   */
  readonly admins?: readonly string[];
  /** Harness tools besides the built-in ones (scripted-harness.ts). */
  readonly extraTools?: ScriptedHarnessOptions['extraTools'];
  /** Where the harness connects agents' own MCP servers (scripted-harness.ts). */
  readonly agentMcp?: ScriptedHarnessOptions['agentMcp'];
  /** The harness's own MCP servers (scripted-harness.ts). */
  readonly mcpServers?: ScriptedHarnessOptions['mcpServers'];
  /**
   * The namespace the harness serves (its certificate names it): that of the conversations
   * the test adds. @default the control plane's, as in-memory conversations get it
   */
  readonly harnessNamespace?: string;
  /** More coordinator options (timings, clock). */
  readonly coordinator?: Partial<
    Omit<
      TurnCoordinatorOptions,
      'state' | 'harness' | 'leases' | 'conversations' | 'approvals' | 'logger'
    >
  >;
}

/** A model reply of plain text. */
export function textReply(text: string): ScriptReply {
  return { text };
}

/** A model reply that calls the calculator (which the test spec puts behind an approval). */
export function calculatorReply(expression: string): ScriptReply {
  return { content: [{ tool_use: { name: 'calculator', input: { expression } } }] };
}

/** A model reply that calls the built-in `memory` tool (put it in `spec.tools.builtin`). */
export function memoryReply(input: JsonObject, id = 'toolu_mem_1'): ScriptReply {
  return { content: [{ tool_use: { id, name: 'memory', input } }] };
}

/** A model reply that asks the user (`__ask_user`): the turn pauses with a question card. */
export function askReply(question: string): ScriptReply {
  return { content: [{ tool_use: { name: '__ask_user', input: { question } } }] };
}

/** A model reply that calls the side-effecting `transfer` tool of {@link unknownFirstTransfer}. */
export const transferReply: ScriptReply = {
  content: [{ tool_use: { id: 'toolu_pay', name: 'transfer', input: { amount: 42 } } }],
};

/**
 * A side-effecting harness tool, `transfer` (put it in `spec.tools.builtin`), whose first
 * call breaks mid-call: its outcome is unknown, so the harness quarantines the turn, as a
 * dropped MCP connection would. `outcomes` answer the later calls, in order; `calls` lists
 * the tool call ids it was asked to run.
 */
export function unknownFirstTransfer(outcomes: readonly { content: string; isError: boolean }[]): {
  readonly extraTools: NonNullable<ScriptedHarnessOptions['extraTools']>;
  readonly calls: string[];
} {
  const calls: string[] = [];
  const tool = {
    name: 'transfer',
    description: 'Moves money.',
    inputSchema: { type: 'object' },
    effect: 'side_effect',
    needsApproval: false,
  } as const;
  return {
    calls,
    extraTools: {
      tools: [tool],
      runner: {
        call(request) {
          calls.push(request.toolCallId);
          const outcome = outcomes[calls.length - 2];
          return outcome === undefined
            ? Promise.reject(new Error('connection reset mid-call'))
            : Promise.resolve(outcome);
        },
      },
    },
  };
}

/** What the scripted model answers when a test gives no script: `reply 1`, `reply 2`, ... */
export const DEFAULT_REPLIES: readonly ScriptReply[] = Array.from({ length: 64 }, (_, i) =>
  textReply(`reply ${String(i + 1)}`),
);

export async function startRealTurns(options: RealTurnsOptions): Promise<RealTurns> {
  const { privateKey } = generateKeyPairSync('ed25519');
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const approvals = ApprovalSigner.fromPem(pem);
  const journal = await StoreJournal.open();
  const harness = await startScriptedHarness({
    replies: options.replies,
    approvalPublicKey: approvals.publicKey,
    logger: options.logger,
    ...(options.extraTools === undefined ? {} : { extraTools: options.extraTools }),
    ...(options.harnessNamespace === undefined ? {} : { namespace: options.harnessNamespace }),
    ...(options.coordinator?.nowMs === undefined ? {} : { nowMs: options.coordinator.nowMs }),
    ...(options.agentMcp === true ? { agentMcp: true } : {}),
    ...(options.mcpServers === undefined ? {} : { mcpServers: options.mcpServers }),
  });
  const conversations = new InMemoryConversations({
    spec: { ...TEST_CONVERSATION_SPEC, ...options.spec },
    status: () => readyStatus(harness.endpoint),
  });
  const leases = new InMemoryLeases('test-replica');
  const connector = new HarnessConnector({
    harnessCa: await testHarnessCa(),
    credentials: HarnessCredentialMinter.fromPem(pem, 'test key', options.coordinator?.nowMs),
  });
  const coordinator = new TurnCoordinator({
    state: journal,
    harness: connector,
    leases,
    conversations,
    approvals,
    identities: {
      isAdmin: (identity) => Promise.resolve((options.admins ?? []).includes(identity)),
    },
    identity: 'test-replica',
    logger: options.logger,
    sandboxWaitMs: 2_000,
    statusDelayMs: 0,
    statusIntervalMs: 5,
    ...options.coordinator,
  });
  return {
    coordinator,
    journal,
    conversations,
    leases,
    harness,
    approvals,
    async close() {
      await coordinator.close(1_000);
      connector.close();
      await harness.close();
      await journal.close();
    },
  };
}

/** The owner of {@link recordApprovedTurns}' conversation. */
export const TEST_OWNER: Caller = {
  identity: 'web:owner',
  identities: ['web:owner'],
  personaId: 'p-owner',
  roles: ['member'],
  sessionId: 's',
};

/** The admin who answers its approval. */
export const TEST_ADMIN: Caller = {
  identity: 'web:admin',
  identities: ['web:admin'],
  personaId: 'p-admin',
  roles: ['admin'],
  sessionId: 's2',
};

/** What {@link recordApprovedTurns} recorded. */
export interface RecordedTurns {
  /** Still running: the caller closes it. */
  readonly turns: RealTurns;
  readonly conversationId: string;
  readonly partition: string;
  /** The journal after both turns. */
  readonly entries: JournalEntry[];
  /** The calculator call's approval request. */
  readonly requestId: string;
}

/**
 * Two real turns for replay and what-if tests: `what is 6 * 7?` (the model calls the
 * calculator, which waits for an approval; the admin approves; the model answers `It is
 * 42.`), then `thanks` (`You are welcome.`). `spec` goes over {@link TEST_CONVERSATION_SPEC}.
 *
 * @throws Error when a turn does not end as described.
 */
export async function recordApprovedTurns(
  logger: Logger,
  spec?: Partial<ConversationSpec>,
): Promise<RecordedTurns> {
  const turns = await startRealTurns({
    replies: [calculatorReply('6 * 7'), textReply('It is 42.'), textReply('You are welcome.')],
    logger,
    admins: [TEST_ADMIN.identity],
    ...(spec === undefined ? {} : { spec }),
  });
  try {
    const conversation = turns.conversations.add(
      { owner: TEST_OWNER.identity },
      { status: readyStatus(turns.harness.endpoint) },
    );
    const conversationId = conversation.metadata.uid ?? '';
    const signal = AbortSignal.timeout(20_000);
    const paused = await turns.coordinator.postMessage(
      TEST_OWNER,
      { conversationId, text: 'what is 6 * 7?', idempotencyKey: 'k1' },
      signal,
    );
    const requestId = paused.approval?.requestId ?? '';
    if (requestId === '') throw new Error(`the first turn did not pause: ${paused.status}`);
    const done = await turns.coordinator.answerApproval(
      TEST_ADMIN,
      { conversationId, requestId, decision: 'approve' },
      signal,
    );
    if (done.status !== 'complete' || done.reply !== 'It is 42.') {
      throw new Error(`the approved turn ended ${done.status}: ${String(done.reply)}`);
    }
    const second = await turns.coordinator.postMessage(
      TEST_OWNER,
      { conversationId, text: 'thanks', idempotencyKey: 'k2' },
      signal,
    );
    if (second.status !== 'complete') throw new Error(`the second turn ended ${second.status}`);
    const partition = `conv-${conversationId}`;
    const entries = await turns.journal.entries(partition);
    return { turns, conversationId, partition, entries, requestId };
  } catch (error) {
    await turns.close();
    throw error;
  }
}

/** Polls `read` every 10 ms until it returns a value (a status the writer has written). */
export async function waitFor<T>(read: () => T | undefined, timeoutMs = 5_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = read();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error('timed out waiting for the status');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
