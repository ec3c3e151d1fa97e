import { existsSync } from 'node:fs';
import { join } from 'node:path';

import type { Env } from '../common/config';
import type { ModelProvider } from '../common/model/model-port';
import { builtinToolRunner, builtinTools } from '../harness/tools/builtin-tools';
import type { LiveOptions, LiveRun } from '../harness/turn/live';

/**
 * `--live` (docs/replay.md, "What-if"): what the scratch run calls. The model is the one
 * the harness would call: Anthropic when `ANTHROPIC_API_KEY` is set (`ANTHROPIC_BASE_URL`
 * optional), else the scripted model of `HARNESS_MODEL_SCRIPT`, else the demo script. The
 * tools it may run are the harness's built-in tools (all pure); it runs no other.
 */

/** The usage error of `--live` alone. */
export const LIVE_NEEDS_WHAT_IF =
  '--live goes with --what-if CHANGE: it continues the changed run from where it departs from the recording';

/** The part of {@link LiveOptions} the CLI supplies. */
export type LiveSetup = Pick<LiveOptions, 'modelFor' | 'tools' | 'runnable' | 'clock' | 'signal'>;

/** Where the demo script sits, from the source tree or from dist/. */
function demoScript(): string {
  const candidates = [
    join(__dirname, '..', 'harness', 'model', 'demo-script.yaml'),
    join(__dirname, '..', '..', 'harness', 'model', 'demo-script.yaml'),
  ];
  return candidates.find((path) => existsSync(path)) ?? candidates[0]!;
}

/**
 * The model and tools of a scratch run, from the environment.
 *
 * @param env @default process.env
 * @throws AppError `not_found` / `invalid_argument` when the model script cannot be read.
 */
export async function liveSetup(
  signal: AbortSignal | undefined,
  env: Env = process.env,
): Promise<LiveSetup> {
  const key = env.ANTHROPIC_API_KEY;
  let modelFor: (model: string) => ModelProvider;
  if (key !== undefined && key !== '') {
    // The model adapters load only for --live: the Anthropic SDK would cost every other
    // command about half a second of start-up (docs/kubectl.md, "Start time").
    const { AnthropicProvider } = await import('../common/model/anthropic-provider.ts');
    const baseUrl = env.ANTHROPIC_BASE_URL;
    modelFor = (model) =>
      new AnthropicProvider({
        apiKey: key,
        ...(baseUrl === undefined || baseUrl === '' ? {} : { baseUrl }),
        ...(model === '' ? {} : { model }),
      });
  } else {
    const { ScriptedProvider } = await import('../harness/model/scripted-provider.ts');
    const script = await ScriptedProvider.fromFile(env.HARNESS_MODEL_SCRIPT ?? demoScript());
    modelFor = () => script;
  }
  return {
    modelFor,
    tools: builtinToolRunner,
    runnable: new Set(builtinTools.map((tool) => tool.name)),
    clock: { nowMs: () => Date.now() },
    ...(signal === undefined ? {} : { signal }),
  };
}

/** The scratch run's lines for the text output. */
export function formatLiveLines(live: LiveRun): string[] {
  const out = [
    `live: a scratch run of turn ${live.turnId} from position ${String(live.from)} (nothing is written)`,
  ];
  for (const call of live.toolCalls) {
    const result =
      call.content === undefined
        ? ''
        : ` -> ${call.isError === true ? 'error: ' : ''}${call.content}`;
    out.push(`  tool ${call.name} ${call.argsJson}: ${call.how}${result}`);
  }
  out.push(`  ${String(live.modelCalls)} live model call(s); ${live.message}`);
  if (live.text !== undefined) out.push(`  answer: ${live.text}`);
  return out;
}
