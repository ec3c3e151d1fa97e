import { createHash } from 'node:crypto';

/**
 * Tool names as the model APIs accept them. The Anthropic Messages API and OpenAI's Chat
 * Completions both take `^[a-zA-Z0-9_-]{1,64}$`, but our canonical names include MCP tools
 * as `<server>/<tool>` (and MCP tool names may contain `.`). Such names are sent under a
 * deterministic alias (see {@link apiToolName}) and mapped back on the way in, so nothing
 * outside an adapter sees an alias.
 */

const API_TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/u;

/**
 * The name a tool is sent under: the canonical name when the API accepts it; otherwise
 * `/` becomes `__`, any other character outside `[a-zA-Z0-9_-]` becomes `_`, and a name
 * that is then too long gets a hash suffix. Deterministic, so a tool keeps its alias
 * across the requests of a conversation and history blocks map the same way.
 */
export function apiToolName(name: string): string {
  if (API_TOOL_NAME.test(name)) return name;
  const safe = name.replaceAll('/', '__').replace(/[^a-zA-Z0-9_-]/gu, '_');
  if (safe.length >= 1 && safe.length <= 64) return safe;
  return `${safe.slice(0, 55)}_${createHash('sha256').update(name).digest('hex').slice(0, 8)}`;
}

/** Canonical name ↔ alias for one request; collisions fall back to a hashed alias. */
export class ToolNames {
  private readonly toApi = new Map<string, string>();
  private readonly fromApi = new Map<string, string>();

  constructor(canonicalNames: readonly string[]) {
    for (const name of canonicalNames) {
      let alias = apiToolName(name);
      if (this.fromApi.has(alias) && this.fromApi.get(alias) !== name) {
        alias = `${alias.slice(0, 55)}_${createHash('sha256').update(name).digest('hex').slice(0, 8)}`;
      }
      this.toApi.set(name, alias);
      this.fromApi.set(alias, name);
    }
  }

  api(name: string): string {
    return this.toApi.get(name) ?? apiToolName(name);
  }

  canonical(alias: string): string {
    return this.fromApi.get(alias) ?? alias;
  }
}
