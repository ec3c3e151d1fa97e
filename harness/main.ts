import { AgentMcpServers } from './server/agent-mcp-servers';
import { Registry } from 'prom-client';
import { collectProcessMetrics } from '../common/process-metrics';
import { ConfigError } from '../common/config';
import type { ServingCertificate } from '../common/serving-certificate';
import { HealthServer } from '../common/health-server';
import { componentLogger, createRootLogger, LogComponent } from '../common/log';
import { startTracing } from '../common/tracing';
import { loadHarnessConfig, type HarnessConfig } from './config';
import { nodeEd25519Verifier } from './crypto/node-ed25519';
import type { ModelProvider } from '../common/model/model-port';
import { ScriptedProvider } from './model/scripted-provider';
import { builtinToolRunner, builtinTools } from './tools/builtin-tools';
import { fetchTool, fetchToolRunner } from './tools/fetch-tool';
import { memoryTool } from './tools/memory-tool';
import { createHarnessMetrics } from './server/harness-metrics';
import { HarnessServer } from './server/harness-server';
import { loadHarnessCertificate } from './server/serving-credentials';
import { createToolRouter } from './server/tool-router';
import { askUserTool, handoffTool } from './turn/reserved-tools';

/**
 * The harness process: load config, build the logger and clients, wire, serve gRPC and the
 * side port, and on SIGTERM drain (the running turn gets its grace period, then a terminal
 * result) and exit 0. Exit 2 on bad configuration, 1 when serving fails.
 */
async function main(): Promise<number> {
  let config: Readonly<HarnessConfig>;
  try {
    config = loadHarnessConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(error.message);
    return 2;
  }
  const logger = createRootLogger({ service: 'harness', level: config.logLevel });
  const log = componentLogger(logger, LogComponent.Main);
  // Bad TLS material is bad configuration: the listener would serve nothing usable.
  let certificate: ServingCertificate;
  try {
    certificate = await loadHarnessCertificate({
      ...config.tls,
      namespace: config.namespace,
      logger: componentLogger(logger, LogComponent.Grpc),
    });
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    return 2;
  }
  // The SDK loads only when OTEL_* asks for it (docs/observability.md).
  const tracing = await startTracing('polychrome-harness', (message) => log.warn(message));

  const registry = new Registry();
  collectProcessMetrics(registry);
  // The Anthropic and MCP SDKs load only when configured: together they cost an idle
  // harness about 25 MiB of resident memory, and there is one harness per conversation.
  const mcp =
    config.mcpServers.length === 0
      ? undefined
      : new (await import('./tools/mcp-tools.js')).McpToolRunner(config.mcpServers, {
          onStderr: (server, text) => log.debug({ server, text }, 'mcp server stderr'),
        });
  // Agents' own MCP servers (docs/turns.md, "Agents"): connected on the first turn that
  // names them, the SDK loaded then.
  const agentMcp = new AgentMcpServers(
    async (server) =>
      new (await import('./tools/mcp-tools.js')).McpToolRunner([server], {
        onStderr: (name, text) => log.debug({ server: name, text }, 'mcp server stderr'),
      }),
  );
  const server = new HarnessServer({
    host: config.host,
    port: config.port,
    certificate,
    namespace: config.namespace,
    logger,
    metrics: createHarnessMetrics(registry),
    defaultMaxSteps: config.maxSteps,
    requireApproval: config.requireApproval,
    toolCatalog: (name) =>
      builtinTools.find((tool) => tool.name === name) ??
      [handoffTool, askUserTool, memoryTool, fetchTool].find((tool) => tool.name === name),
    ...(mcp === undefined ? {} : { mcpTools: mcp }),
    agentMcp,
    ackTimeoutMs: config.ackTimeoutMs,
    toolTimeoutMs: config.toolTimeoutMs,
    recordAgentConfig: config.recordAgentConfig,
    deps: {
      modelFor: await modelSource(config, logger),
      tools: createToolRouter(
        [
          { names: new Set(builtinTools.map((tool) => tool.name)), runner: builtinToolRunner },
          { names: new Set([fetchTool.name]), runner: fetchToolRunner },
        ],
        mcp,
      ),
      ...(mcp === undefined ? {} : { paidTools: mcp }),
      approvalVerifier: nodeEd25519Verifier,
      approvalPublicKey: config.approvalPublicKey,
      ...(config.approvalNextPublicKey === undefined
        ? {}
        : { approvalNextPublicKey: config.approvalNextPublicKey }),
    },
  });
  const health = new HealthServer({
    host: config.host,
    port: config.healthPort,
    isReady: () => server.isServing(),
    registry,
  });

  const stopped = new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  try {
    const port = await server.start();
    const side = await health.start();
    log.info({ port, healthPort: side.port, model: config.model.kind }, 'harness ready');
  } catch (error) {
    log.error({ err: error }, 'harness failed to start');
    await Promise.allSettled([server.close(), health.close(), mcp?.close(), agentMcp.close()]);
    return 1;
  }
  const signal = await stopped;
  log.info({ signal, graceMs: config.shutdownGraceMs }, 'harness shutting down');
  await server.drain(config.shutdownGraceMs);
  await Promise.allSettled([health.close(), mcp?.close(), agentMcp.close(), tracing?.shutdown()]);
  log.info('harness stopped');
  return 0;
}

/**
 * The model per agent setting: scripted (one script for every turn), Anthropic or
 * OpenAI-compatible (one provider per model name, built on first use).
 */
async function modelSource(
  config: Readonly<HarnessConfig>,
  logger: ReturnType<typeof createRootLogger>,
): Promise<(model: string) => ModelProvider> {
  const source = config.model;
  if (source.kind === 'scripted') {
    const scripted = await ScriptedProvider.fromFile(source.scriptPath);
    return () => scripted;
  }
  const sdkLog = componentLogger(logger, LogComponent.Turn, { source: `${source.kind}-sdk` });
  const build =
    source.kind === 'anthropic'
      ? (await import('../common/model/anthropic-provider.js')).AnthropicProvider
      : (await import('../common/model/openai-provider.js')).OpenAiProvider;
  const providers = new Map<string, ModelProvider>();
  return (model) => {
    const name = model === '' ? (source.defaultModel ?? '') : model;
    let provider = providers.get(name);
    if (provider === undefined) {
      provider = new build({
        apiKey: source.apiKey,
        ...(source.baseUrl === undefined ? {} : { baseUrl: source.baseUrl }),
        ...(name === '' ? {} : { model: name }),
        logger: sdkLog,
      });
      providers.set(name, provider);
    }
    return provider;
  };
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error('harness: fatal error', error);
    process.exit(1);
  },
);
