import type { AgentMcpServers } from './agent-mcp-servers';
import type { PaidToolRunner } from '../turn/ports/payment-port';
import type { Logger } from 'pino';
import type { RequestIds } from '../../common/request-ids';
import type { ServingCertificate } from '../../common/serving-certificate';
import type { SignatureVerifier } from '../turn/approval-token';
import type { ModelProvider } from '../../common/model/model-port';
import type { ToolRunner } from '../turn/ports/tool-port';
import type { Clock } from '../turn/effect-calls';
import type { HarnessMetrics } from './harness-metrics';
import type { ToolCatalog } from './tool-spec-codec';
import type { McpToolSource } from './turn-tools';

/**
 * What the harness server is built with (`main.ts` builds it once): where it listens,
 * whom it serves, what a turn runs against, and the deployment's limits and policy.
 */

/** What a turn runs against; built once in `main.ts`. */
export interface HarnessTurnDeps {
  /** The model for a turn; `model` is the agent's setting (empty: the harness default). */
  modelFor(model: string): ModelProvider;
  /** Runs built-in and MCP tools. */
  readonly tools: ToolRunner;
  /**
   * Calls the harness's MCP servers' tools again with a payment the control plane signed
   * (docs/payments.md, "A paid MCP tool"). Absent: such a payment is not sent.
   */
  readonly paidTools?: PaidToolRunner;
  readonly approvalVerifier: SignatureVerifier;
  /** The control plane's approval public key (raw 32 bytes). */
  readonly approvalPublicKey: Uint8Array;
  /**
   * During a key rotation, the control plane's next public key: approvals and credentials
   * signed by either key pass (docs/operator.md, "Rotating the control plane's key").
   */
  readonly approvalNextPublicKey?: Uint8Array;
  /** @default Date.now */
  readonly clock?: Clock;
  /** @default the docs/approvals.md derivation */
  readonly ids?: RequestIds;
}

/** Options of {@link HarnessServer}. */
export interface HarnessServerOptions {
  /** @default '0.0.0.0' */
  readonly host?: string;
  /** 0 lets the system pick (tests). @default 7070 */
  readonly port?: number;
  /**
   * The serving certificate of the pod's namespace (serving-credentials.ts), read again
   * while the server runs; the server stops reading it when it closes. There is no
   * plaintext listener.
   */
  readonly certificate: ServingCertificate;
  /**
   * Keys the per-conversation credential may be signed with (conversation-binding.ts):
   * the current control-plane key and, during a rotation, the next.
   * @default the approval key and, in a rotation, the next one
   */
  readonly credentialKeys?: readonly Uint8Array[];
  /** The conversation uid the pod was started for; absent: bind to the first valid call. */
  readonly conversation?: string;
  /** The pod's namespace (`HARNESS_NAMESPACE`): credentials for another are refused. */
  readonly namespace: string;
  readonly deps: HarnessTurnDeps;
  /** The root logger; the server makes its `grpc` and `turn` children. */
  readonly logger: Logger;
  readonly metrics?: HarnessMetrics;
  /** Used when `start` sets no deployment limit. @default 8 */
  readonly defaultMaxSteps?: number;
  /**
   * Deployment approval rules (`name`, `server/tool`, `server/*`; see
   * tools/approval-policy.ts): matching tools need approval whatever `start` says. They can
   * only add approvals.
   */
  readonly requireApproval?: readonly string[];
  /**
   * Tools `start` may name by reference (an empty schema): the built-in and reserved
   * tools, so the control plane need not know their definitions.
   */
  readonly toolCatalog?: ToolCatalog;
  /**
   * The harness's own MCP servers: every turn also offers their tools (turn-tools.ts),
   * listed when the turn runs. `start` may name them by reference to require approval.
   */
  readonly mcpTools?: McpToolSource;
  /**
   * Where agents' own MCP servers (`DispatchedAgent.mcp_servers`) are connected, each
   * offered to its agent only (agent-mcp-servers.ts). Absent: they are not offered.
   */
  readonly agentMcp?: AgentMcpServers;
  /** How long the first message (`start`) may take. @default 10000 */
  readonly startTimeoutMs?: number;
  /** How long one step ack (the journal append) may take. @default 30000 */
  readonly ackTimeoutMs?: number;
  /** @default 60000 */
  readonly toolTimeoutMs?: number;
  /**
   * Record the agent configuration and each model request's digest (docs/replay.md).
   * @default true
   */
  readonly recordAgentConfig?: boolean;
}

/** The control plane's keys the harness trusts: the current one and, in a rotation, the next. */
export function trustedKeys(deps: HarnessTurnDeps): readonly Uint8Array[] {
  const next = deps.approvalNextPublicKey;
  return next === undefined ? [deps.approvalPublicKey] : [deps.approvalPublicKey, next];
}
