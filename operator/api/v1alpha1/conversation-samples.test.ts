import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { validFullConversationSpec, validMinimalConversationSpec } from './conversation-cases';
import { conversationSchema } from './conversation-crd';
import type { JsonSchema } from './schema-builder';
import { checkAgainstSchema, isPlainObject } from './schema-check';

const samplesDir = join(__dirname, '../../../config/samples');

function readSample(file: string): Record<string, unknown> {
  const parsed: unknown = parse(readFileSync(join(samplesDir, file), 'utf8'));
  if (!isPlainObject(parsed)) throw new Error(`${file}: not a YAML mapping`);
  return parsed;
}

/** Dotted paths of every schema property under a node (`[]` for list items). */
function schemaPaths(node: JsonSchema, path: string): string[] {
  const own = Object.entries(node.properties ?? {}).flatMap(([name, child]) => [
    `${path}.${name}`,
    ...schemaPaths(child, `${path}.${name}`),
  ]);
  return node.items !== undefined ? [...own, ...schemaPaths(node.items, `${path}[]`)] : own;
}

/** Dotted paths present in a value, in the same notation. */
function valuePaths(value: unknown, path: string): string[] {
  if (Array.isArray(value)) return value.flatMap((item) => valuePaths(item, `${path}[]`));
  if (!isPlainObject(value)) return [];
  return Object.entries(value).flatMap(([name, child]) => [
    `${path}.${name}`,
    ...valuePaths(child, `${path}.${name}`),
  ]);
}

describe.each([
  ['conversation-minimal.yaml', validMinimalConversationSpec],
  ['conversation-full.yaml', validFullConversationSpec],
])('sample %s', (file, expectedSpec) => {
  const sample = readSample(file);

  it('is a named Conversation', () => {
    expect(sample['apiVersion']).toBe('polychrome.dev/v1alpha1');
    expect(sample['kind']).toBe('Conversation');
    const metadata = sample['metadata'];
    expect(isPlainObject(metadata) && typeof metadata['name'] === 'string').toBe(true);
  });

  it('passes the schema checks that run without an API server', () => {
    expect(checkAgainstSchema(conversationSchema, sample, '')).toEqual([]);
  });

  // The spec cases are what the integration tests apply to a real API server; keeping the
  // samples equal to them means the samples are server-checked too.
  it('equals the spec case the integration tests apply', () => {
    expect(sample['spec']).toEqual(expectedSpec);
  });
});

describe('full sample', () => {
  it('sets every spec field', () => {
    const present = new Set(valuePaths(readSample('conversation-full.yaml')['spec'], 'spec'));
    const spec = conversationSchema.properties?.['spec'];
    if (spec === undefined) throw new Error('schema has no spec');
    // agentRef excludes the inline agent: config/samples/agent-triage.yaml sets it.
    const missing = schemaPaths(spec, 'spec').filter((p) => !present.has(p));
    expect(missing).toEqual(['spec.agentRef', 'spec.agentRef.name']);
  });
});

describe('samples kustomization', () => {
  it('lists every sample in the folder', () => {
    const files = readdirSync(samplesDir).filter(
      (f) => f.endsWith('.yaml') && f !== 'kustomization.yaml',
    );
    const listed = readSample('kustomization.yaml')['resources'] as string[];
    expect([...listed].sort()).toEqual(files.sort());
  });
});
