import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { envInt, envOptionalString, parseConfig, type Env } from '../common/config';
import { AppError } from '../common/errors';
import {
  AnthropicProvider,
  DEFAULT_ANTHROPIC_BASE_URL,
  DEFAULT_ANTHROPIC_MODEL,
} from '../common/model/anthropic-provider';
import type { SdkLogger } from '../common/model/provider-options';
import type { SummaryModelClient } from './turns/summarizer';

/**
 * The control plane's model, for summaries (docs/turns.md, "Summaries"): its one use of a
 * model. It goes through the harness's provider code (common/model/), so a gateway set as
 * the base URL serves both.
 *
 * | Variable | Meaning | Default |
 * |---|---|---|
 * | `POLYCHROME_SUMMARY_API_KEY_FILE` | a file holding the Messages API key (mount it from a Secret) | unset: no summaries; turns get their window only |
 * | `POLYCHROME_SUMMARY_BASE_URL` | the Messages API endpoint, or the gateway in front of it | `https://api.anthropic.com` |
 * | `POLYCHROME_SUMMARY_MODEL` | the model that writes summaries | the harness's default model |
 * | `POLYCHROME_SUMMARY_MAX_TOKENS` | the longest summary, in tokens, 64 to 8192 | 1024 |
 */
const schema = z.object({
  POLYCHROME_SUMMARY_API_KEY_FILE: envOptionalString(),
  POLYCHROME_SUMMARY_BASE_URL: envOptionalString().pipe(z.url().optional()),
  POLYCHROME_SUMMARY_MODEL: envOptionalString(),
  POLYCHROME_SUMMARY_MAX_TOKENS: envInt({ default: 1024, min: 64, max: 8192 }),
});

export interface SummaryConfig {
  readonly apiKeyPath: string;
  readonly baseUrl: string;
  readonly model: string;
  readonly maxTokens: number;
}

/**
 * The summary model's settings, or undefined when no key file is set (summaries off).
 *
 * @throws ConfigError naming every bad variable.
 */
export function loadSummaryConfig(env?: Env): SummaryConfig | undefined {
  const c = parseConfig('control plane', schema, env);
  if (c.POLYCHROME_SUMMARY_API_KEY_FILE === undefined) return undefined;
  return Object.freeze({
    apiKeyPath: c.POLYCHROME_SUMMARY_API_KEY_FILE,
    baseUrl: c.POLYCHROME_SUMMARY_BASE_URL ?? DEFAULT_ANTHROPIC_BASE_URL,
    model: c.POLYCHROME_SUMMARY_MODEL ?? DEFAULT_ANTHROPIC_MODEL,
    maxTokens: c.POLYCHROME_SUMMARY_MAX_TOKENS,
  });
}

/**
 * The summarizer's model client: the key is read from its file here, once, and stays in
 * this process (never logged, never in an error).
 *
 * @throws AppError `failed_precondition` when the key file cannot be read or is empty.
 */
export async function summaryModelClient(
  config: SummaryConfig,
  logger: SdkLogger,
): Promise<SummaryModelClient> {
  let apiKey: string;
  try {
    apiKey = (await readFile(config.apiKeyPath, 'utf8')).trim();
  } catch (error) {
    throw new AppError(
      'failed_precondition',
      `POLYCHROME_SUMMARY_API_KEY_FILE: cannot read ${config.apiKeyPath} (${(error as Error).message}); mount the Secret holding the key there, or unset the variable to run without summaries`,
    );
  }
  if (apiKey === '') {
    throw new AppError(
      'failed_precondition',
      `POLYCHROME_SUMMARY_API_KEY_FILE: ${config.apiKeyPath} is empty; put the Messages API key in it`,
    );
  }
  const provider = new AnthropicProvider({
    apiKey,
    baseUrl: config.baseUrl,
    model: config.model,
    maxTokens: config.maxTokens,
    logger,
  });
  return { provider, settings: { model: config.model, maxTokens: config.maxTokens } };
}
