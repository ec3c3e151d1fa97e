import { z } from 'zod';

import { envOptionalString, envString, parseConfig, type Env } from '../common/config';
import { ApiClient } from './api-client';
import { stringValue, UsageError } from './cli-support';
import type { ApiConnection, CommandDoor } from './command-door';

/*
 * The public API as the commands' door (`polychrome VERB ID`): a conversation by its uid,
 * the API's URL and a session token from the flags or the environment (docs/api.md).
 */

/** Where the API is when neither --api nor POLYCHROME_API_URL says. */
export const DEFAULT_API_URL = 'http://127.0.0.1:8080';

const apiEnvSchema = z
  .object({
    POLYCHROME_API_URL: envString({ default: DEFAULT_API_URL }),
    POLYCHROME_TOKEN: envOptionalString(),
  })
  .transform((env) => ({ apiUrl: env.POLYCHROME_API_URL, token: env.POLYCHROME_TOKEN }));

/** The API flags every conversation command takes. */
export const apiOptions = {
  api: { type: 'string' },
  token: { type: 'string' },
} as const;

const CONVERSATION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/u;

/** The public API: `polychrome VERB ID`, by the Conversation's uid, with a session token. */
export const publicApiDoor: CommandDoor = {
  program: ['polychrome'],
  options: apiOptions,
  conversation: (value, command) => conversationIdOf(value, command),
  connect: (values, env) => Promise.resolve(connectApi(values, env)),
  streamVerb: 'stream',
  noun: 'conversation id',
};

/** The API client from the flags and environment. @throws UsageError */
export function connectApi(values: Record<string, unknown>, env: Env | undefined): ApiConnection {
  const config = parseConfig('polychrome CLI', apiEnvSchema, env);
  const flagUrl = stringValue(values.api);
  const url = flagUrl ?? config.apiUrl;
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    throw new UsageError(
      `${flagUrl === undefined ? 'POLYCHROME_API_URL' : '--api'} must be an http or https URL ` +
        `such as ${DEFAULT_API_URL}, got ${JSON.stringify(url)}`,
    );
  }
  const token = stringValue(values.token) ?? config.token;
  if (token === undefined || token.trim() === '') {
    throw new UsageError(
      'no API token: pass --token T or set POLYCHROME_TOKEN to a session token ' +
        '(make dev writes one: export POLYCHROME_TOKEN=$(cat .local/dev/token))',
    );
  }
  return {
    client: new ApiClient({ baseUrl: url, token: token.trim() }),
    extraFlags: flagUrl === undefined ? [] : ['--api', flagUrl],
  };
}

/** The conversation id positional. @throws UsageError */
export function conversationIdOf(value: string | undefined, command: string): string {
  if (value === undefined) throw new UsageError(`${command} needs a conversation id`);
  if (!CONVERSATION_ID.test(value)) {
    throw new UsageError(
      `${JSON.stringify(value)} is not a conversation id: expected the Conversation's uid, a ` +
        "lower-case UUID (kubectl get conversation NAME -o jsonpath='{.metadata.uid}')",
    );
  }
  return value;
}
