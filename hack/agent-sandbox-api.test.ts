/**
 * The agent-sandbox group and version are written in TypeScript once
 * (operator/controller/agent-sandbox-api.ts). YAML cannot import it, so this checks that
 * every manifest naming an agent-sandbox kind or group names the same, and that the README
 * states the version the Makefile pins.
 */
import { describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { AgentSandboxApi } from '../operator/controller/agent-sandbox-api';
import { repoRoot } from './lib/paths';

const SANDBOX_KINDS = new Set(['Sandbox', 'SandboxClaim', 'SandboxTemplate', 'SandboxWarmPool']);
const GROUPS = new Set([AgentSandboxApi.coreGroup, AgentSandboxApi.extensionsGroup]);

/** Every YAML document under config/ and hack/dev/ (the CRD copies aside). */
function manifests(): { file: string; doc: Record<string, unknown> }[] {
  const out: { file: string; doc: Record<string, unknown> }[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(join(repoRoot, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) {
        if (path !== 'config/crd/agent-sandbox') walk(path);
      } else if (/\.ya?ml$/u.test(entry.name)) {
        for (const doc of parseAllDocuments(readFileSync(join(repoRoot, path), 'utf8'))) {
          const value: unknown = doc.toJS();
          if (typeof value === 'object' && value !== null) {
            out.push({ file: path, doc: value as Record<string, unknown> });
          }
        }
      }
    }
  };
  walk('config');
  walk('hack/dev');
  return out;
}

describe('the agent-sandbox API version, written once', () => {
  const docs = manifests();

  it('is the apiVersion of every agent-sandbox object in config/ and hack/dev/', () => {
    const sandboxObjects = docs.filter(({ doc }) => SANDBOX_KINDS.has(String(doc['kind'])));
    expect(sandboxObjects.map(({ file }) => file)).toEqual(
      expect.arrayContaining([
        'config/sandbox/sandbox-template.yaml',
        'config/sandbox/sandbox-warm-pool.yaml',
      ]),
    );
    for (const { file, doc } of sandboxObjects) {
      const wanted =
        doc['kind'] === 'Sandbox'
          ? AgentSandboxApi.coreApiVersion
          : AgentSandboxApi.extensionsApiVersion;
      expect(`${file}: ${String(doc['apiVersion'])}`).toBe(`${file}: ${wanted}`);
    }
  });

  it('names only the groups Polychrome speaks in the RBAC rules on agent-sandbox kinds', () => {
    const rules = docs
      .filter(({ doc }) => doc['kind'] === 'ClusterRole' || doc['kind'] === 'Role')
      .flatMap(
        ({ doc }) => (doc['rules'] ?? []) as { apiGroups?: string[]; resources?: string[] }[],
      )
      .filter((rule) => (rule.resources ?? []).some((r) => /^sandbox/u.test(r)));
    expect(rules.length).toBeGreaterThan(0);
    for (const rule of rules) {
      for (const group of rule.apiGroups ?? []) expect(GROUPS.has(group as never)).toBe(true);
    }
  });

  it('is pinned at a v1.0.x release, and the README says which', () => {
    const pinned = execFileSync('make', ['-s', 'print-AGENT_SANDBOX_VERSION'], {
      cwd: repoRoot,
      encoding: 'utf8',
      env: Object.fromEntries(
        Object.entries(process.env).filter(
          ([k]) => !['MAKEFLAGS', 'MFLAGS', 'MAKELEVEL'].includes(k),
        ),
      ),
    }).trim();
    expect(pinned).toMatch(/^v1\.0\.\d+$/u);
    expect(readFileSync(join(repoRoot, 'README.md'), 'utf8')).toContain(
      `agent-sandbox \`${pinned}\``,
    );
  });
});
