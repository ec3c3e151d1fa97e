/**
 * The Conversation `make dev` applies (hack/dev/conversation-hello.yaml) against the CRD
 * schema and against the scripted demo model it meets without ANTHROPIC_API_KEY: every
 * tool the demo script calls must be offered and must need approval, so the first message
 * shows an approval card (README, "Talk to it").
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { checkAgainstSchema, isPlainObject } from '../../operator/api/v1alpha1/schema-check';
import { conversationSchema } from '../../operator/api/v1alpha1/conversation-crd';
import { repoRoot } from '../lib/paths';

function readYaml(path: string): Record<string, unknown> {
  const parsed: unknown = parse(readFileSync(join(repoRoot, path), 'utf8'));
  if (!isPlainObject(parsed)) throw new Error(`${path}: not a YAML mapping`);
  return parsed;
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

const conversation = readYaml('hack/dev/conversation-hello.yaml');
const script = readYaml('harness/model/demo-script.yaml');

/** Names of the tools the demo script's replies call, in order. */
function scriptedToolCalls(): string[] {
  return list(script['replies']).flatMap((reply) =>
    list(isPlainObject(reply) ? reply['content'] : undefined).flatMap((block) => {
      const use = isPlainObject(block) ? block['tool_use'] : undefined;
      return isPlainObject(use) && typeof use['name'] === 'string' ? [use['name']] : [];
    }),
  );
}

describe('the dev Conversation', () => {
  it('is the Conversation hello and passes the schema checks that run without an API server', () => {
    expect(conversation['kind']).toBe('Conversation');
    expect(conversation['metadata']).toEqual({ name: 'hello' });
    expect(checkAgainstSchema(conversationSchema, conversation, '')).toEqual([]);
  });

  it('offers every tool the demo script calls, each behind an approval', () => {
    const calls = scriptedToolCalls();
    expect(calls.length).toBeGreaterThan(0);
    const spec = conversation['spec'];
    const tools = isPlainObject(spec) ? spec['tools'] : undefined;
    const builtin = list(isPlainObject(tools) ? tools['builtin'] : undefined);
    const approval = list(isPlainObject(tools) ? tools['requireApproval'] : undefined);
    for (const name of calls) {
      expect(builtin).toContain(name);
      expect(approval).toContain(name);
    }
  });
});
