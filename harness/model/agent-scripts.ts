import { readFile } from 'node:fs/promises';
import { basename, extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { AppError } from '../../common/errors';
import { modelScriptSchema, ScriptedProvider } from './scripted-provider';

/**
 * Scripts keyed by agent, for a demo of several agents on one scripted model: each agent
 * plays its own {@link ScriptedProvider}, so a panel's lead, researcher and skeptic each
 * answer in their own words and in their own order. A file looks like:
 *
 * ```yaml
 * name: panel-demo             # optional; defaults to the file name
 * agents:
 *   panel-lead:                # an agent's name, then a script in ScriptedProvider's format
 *     repeat: true
 *     replies:
 *       - content:
 *           - tool_use: { name: __delegate_to, input: { agent: researcher, task: Find the figures. } }
 *       - text: The panel's answer.
 *   researcher:
 *     after_script: { text: The figures. }
 *     replies: []
 * ```
 *
 * Who picks the agent of a call is the caller's business (hack/lib/demo-model.ts reads it
 * from the request's system prompt).
 */

const agentScriptsSchema = z.strictObject({
  name: z.string().min(1).optional(),
  agents: z
    .record(
      z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/u, 'an agent name is a DNS label'),
      modelScriptSchema,
    )
    .refine((agents) => Object.keys(agents).length > 0, 'name at least one agent'),
});

/**
 * Parses agent scripts from YAML or JSON text.
 *
 * @returns each agent's scripted model, by agent name.
 * @throws AppError `invalid_argument` naming every field that does not fit.
 */
export function parseAgentScripts(text: string, name: string): Map<string, ScriptedProvider> {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new AppError('invalid_argument', `agent scripts ${name}: not valid YAML or JSON`, {
      cause: error,
      details: { script: name },
    });
  }
  const parsed = agentScriptsSchema.safeParse(raw);
  if (!parsed.success) {
    throw new AppError(
      'invalid_argument',
      `agent scripts ${name} do not fit the format:\n${z.prettifyError(parsed.error)}`,
      { details: { script: name } },
    );
  }
  const scripts = parsed.data;
  const label = scripts.name ?? name;
  return new Map(
    Object.entries(scripts.agents).map(([agent, script]) => [
      agent,
      new ScriptedProvider(script, `${label}/${agent}`),
    ]),
  );
}

/**
 * Loads agent scripts from a file (`.yaml`, `.yml` or `.json`).
 *
 * @throws AppError `not_found` when the file cannot be read, `invalid_argument` when it
 *   does not parse.
 */
export async function agentScriptsFromFile(path: string): Promise<Map<string, ScriptedProvider>> {
  const name = basename(path, extname(path));
  const text = await readFile(path, 'utf8').catch((error: unknown) => {
    throw new AppError('not_found', `agent scripts ${name}: cannot read the file; check the path`, {
      cause: error,
      details: { script: name },
    });
  });
  return parseAgentScripts(text, name);
}
