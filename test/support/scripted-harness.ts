/**
 * The real harness gRPC server (harness/server) in-process on loopback, wired as
 * harness/main.ts wires it (TLS with its namespace's certificate, built-in tools, the
 * reserved tools in the catalog, the ed25519 approval verifier), with the scripted model
 * playing `replies` in order.
 */
import { fetchTool, fetchToolRunner } from '../../harness/tools/fetch-tool';
import { AgentMcpServers } from '../../harness/server/agent-mcp-servers';
import { McpToolRunner } from '../../harness/tools/mcp-tools';
import type { McpServerConfig } from '../../harness/tools/mcp-server-config';
import type { Logger } from 'pino';
import type { ServingCertificate } from '../../common/serving-certificate';
import { nodeEd25519Verifier } from '../../harness/crypto/node-ed25519';
import { ScriptedProvider, type ScriptReply } from '../../harness/model/scripted-provider';
import { HarnessServer } from '../../harness/server/harness-server';
import { createToolRouter } from '../../harness/server/tool-router';
import { builtinToolRunner, builtinTools } from '../../harness/tools/builtin-tools';
import { memoryTool } from '../../harness/tools/memory-tool';
import type { ToolRunner } from '../../harness/turn/ports/tool-port';
import type { TurnTool } from '../../harness/turn/turn-records';
import { askUserTool, handoffTool } from '../../harness/turn/reserved-tools';
import { DEFAULT_CONVERSATION_NAMESPACE } from '../../operator/config';
import { testHarnessCertificate } from './harness-tls';

export interface ScriptedHarness {
  readonly server: HarnessServer;
  /** `host:port`, what a Conversation's `status.sandbox.endpoint` says. */
  readonly endpoint: string;
  /** The model: its requests and call count. */
  readonly model: ScriptedProvider;
  close(): Promise<void>;
}

export interface ScriptedHarnessOptions {
  readonly replies: readonly ScriptReply[];
  /**
   * The namespace the harness serves: its certificate names it, and it refuses credentials
   * for another. @default the control plane's, {@link DEFAULT_CONVERSATION_NAMESPACE}
   */
  readonly namespace?: string;
  /**
   * What the listener presents instead of the run's certificate for `namespace`: a test's
   * impostor (another CA's certificate). @default {@link testHarnessCertificate}
   */
  readonly certificate?: ServingCertificate;
  /** The control plane's approval public key (raw 32 bytes). */
  readonly approvalPublicKey: Uint8Array;
  readonly logger: Logger;
  /**
   * More harness tools than the built-in ones, with the runner that runs them: a test's
   * side-effecting tool, whose runner decides when its outcome is unknown.
   */
  readonly extraTools?: { readonly tools: readonly TurnTool[]; readonly runner: ToolRunner };
  /**
   * The harness's clock: a test that fixes the control plane's clock gives it here too, as
   * one host's clock serves both in production (approval expiries compare across them).
   */
  readonly nowMs?: () => number;
  /**
   * Connect agents' own MCP servers (harness-options.ts `agentMcp`) with the real MCP
   * adapter, as the harness process does; closed with the harness. @default false
   */
  readonly agentMcp?: boolean;
  /**
   * The harness's own MCP servers (`HARNESS_MCP_SERVERS`), run by the real MCP adapter as
   * the harness process runs them: their tools offered to every turn, and paid calls of
   * them (docs/payments.md, "A paid MCP tool"); closed with the harness. @default none
   */
  readonly mcpServers?: readonly McpServerConfig[];
}

/** The harness's built-in `fetch` tool (harness/main.ts offers it), as `extraTools`. */
export const FETCH_EXTRA_TOOLS: NonNullable<ScriptedHarnessOptions['extraTools']> = {
  tools: [fetchTool],
  runner: fetchToolRunner,
};

export async function startScriptedHarness(
  options: ScriptedHarnessOptions,
): Promise<ScriptedHarness> {
  const model = new ScriptedProvider({ replies: [...options.replies] }, 'test-script');
  const extra = options.extraTools;
  const namespace = options.namespace ?? DEFAULT_CONVERSATION_NAMESPACE;
  const agentMcp =
    options.agentMcp === true
      ? new AgentMcpServers((config) => Promise.resolve(new McpToolRunner([config])))
      : undefined;
  const mcp = options.mcpServers === undefined ? undefined : new McpToolRunner(options.mcpServers);
  const server = new HarnessServer({
    host: '127.0.0.1',
    port: 0,
    certificate: options.certificate ?? (await testHarnessCertificate(namespace, options.logger)),
    namespace,
    logger: options.logger,
    ...(agentMcp === undefined ? {} : { agentMcp }),
    ...(mcp === undefined ? {} : { mcpTools: mcp }),
    toolCatalog: (name) =>
      builtinTools.find((tool) => tool.name === name) ??
      extra?.tools.find((tool) => tool.name === name) ??
      [handoffTool, askUserTool, memoryTool].find((tool) => tool.name === name),
    deps: {
      modelFor: () => model,
      tools: createToolRouter(
        [
          { names: new Set(builtinTools.map((tool) => tool.name)), runner: builtinToolRunner },
          ...(extra === undefined
            ? []
            : [{ names: new Set(extra.tools.map((tool) => tool.name)), runner: extra.runner }]),
        ],
        mcp,
      ),
      ...(mcp === undefined ? {} : { paidTools: mcp }),
      approvalVerifier: nodeEd25519Verifier,
      approvalPublicKey: options.approvalPublicKey,
      ...(options.nowMs === undefined ? {} : { clock: { nowMs: options.nowMs } }),
    },
  });
  const port = await server.start();
  return {
    server,
    endpoint: `127.0.0.1:${String(port)}`,
    model,
    close: async () => {
      await server.close();
      await agentMcp?.close();
      await mcp?.close();
    },
  };
}
