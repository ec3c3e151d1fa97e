/**
 * The scripted demo endpoint of `make dev SAMPLE=...` without an API key (hack/lib/demo-model.ts):
 *
 *   tsx hack/demo-model.ts SAMPLE
 *
 * listens on 127.0.0.1:8090 as the Anthropic Messages API, with the placeholder key the
 * control plane sends along a ModelConfig without a Secret, and answers each agent of the
 * sample from its script, until SIGTERM.
 */
import { NO_KEY } from '../operator/models/provider-model-relay';
import { agentScriptsFromFile } from '../harness/model/agent-scripts';
import { MessagesApiServer } from '../test/support/messages-api-server';
import { demoResponder } from './lib/demo-model';
import { DEMO_MODEL_PORT, demoAgents, devSample, sampleObjects } from './lib/dev-samples';
import { join } from 'node:path';
import { repoRoot } from './lib/paths';

async function main(): Promise<void> {
  const sample = devSample(process.argv[2]);
  if (sample === undefined) throw new Error('usage: demo-model.ts SAMPLE');
  const scripts = await agentScriptsFromFile(join(repoRoot, sample.script));
  const server = await MessagesApiServer.start({
    apiKey: NO_KEY,
    port: DEMO_MODEL_PORT,
    record: false,
    respond: demoResponder(scripts, demoAgents(sampleObjects(sample))),
  });
  console.log(
    `demo model: the ${sample.name} sample's agents (${[...scripts.keys()].join(', ')}) on ${server.url}`,
  );
  const stop = (): void => {
    void server.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
