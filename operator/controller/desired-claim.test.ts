import { describe, expect, it } from '@jest/globals';
import type { ConversationSpec } from '../api/v1alpha1/conversation-spec';
import type { ClaimEnvVar } from './agent-sandbox-api';
import { claimPlanOf, sameClaimEnv } from './desired-claim';
import type { EnvVarManifest } from './desired-pod';
import { desiredPod } from './desired-pod';
import type { AgentSandboxObservation, ObservedSandboxTemplate } from './snapshot';
import { agentSnapshot, conversation } from './snapshot-fixtures';

const tickets = { name: 'tickets', transport: 'http' as const, url: 'https://t.example/mcp' };
const tools: ConversationSpec['tools'] = {
  mcpServers: [tickets],
  builtin: ['memory'],
  requireApproval: ['memory', 'tickets/close_ticket'],
};

function template(
  policy: string | undefined,
  env: EnvVarManifest[] = [],
  more: Record<string, unknown> = {},
): ObservedSandboxTemplate {
  return {
    ...(policy === undefined ? {} : { envVarsInjectionPolicy: policy }),
    podSpec: {
      containers: [
        { name: 'sidecar', image: 'x' },
        { name: 'harness', image: 'polychrome/harness:test', env, ...more },
      ],
    },
  };
}

function observed(
  spec: Partial<ConversationSpec>,
  over: Partial<Omit<AgentSandboxObservation, 'backend'>> = {},
) {
  const snapshot = agentSnapshot(conversation(spec), over);
  if (snapshot.sandbox.backend !== 'agent-sandbox') throw new Error('agent-sandbox expected');
  return { c: snapshot.conversation, sandbox: snapshot.sandbox };
}

describe('claimPlanOf', () => {
  it('sends the same variables as the pod backend gives its harness container', () => {
    const { c, sandbox } = observed({ tools }, { template: template('Allowed') });
    const plan = claimPlanOf(c, sandbox);
    expect(plan.gaps).toEqual([]);
    // The pod backend's env for the same container and tools: one merge, both backends.
    const pod = desiredPod({
      conversation: c,
      templateSpec: template('Allowed').podSpec!,
      harnessImage: 'unused',
    });
    const harness = pod.spec.containers.find((x) => x.name === 'harness');
    expect(plan.claim?.spec.env).toEqual(
      (harness?.env ?? []).map((e) => ({
        name: e.name,
        value: e.value,
        containerName: 'harness',
      })),
    );
    expect(plan.claim?.spec.env?.map((e) => e.name)).toEqual([
      'HARNESS_MCP_SERVERS',
      'HARNESS_REQUIRE_APPROVAL',
    ]);
    expect(JSON.parse(plan.claim!.spec.env![0]!.value)).toEqual([
      { name: 'tickets', transport: 'http', url: 'https://t.example/mcp' },
    ]);
    expect(plan.claim?.spec.env?.[1]?.value).toBe('memory tickets/close_ticket');
  });

  it('sends no env when the conversation has no MCP servers or approval rules (the warm pool serves it)', () => {
    const { c, sandbox } = observed({ tools: { builtin: ['memory'] } });
    const plan = claimPlanOf(c, sandbox);
    expect(plan.claim?.spec).toEqual({ warmPoolRef: { name: 'polychrome-harness' } });
  });

  it('makes a claim without env while the warm pool is missing, but none that needs its template', () => {
    const missing = { warmPool: undefined, templateFound: undefined, template: undefined };
    const plain = observed({}, missing);
    expect(claimPlanOf(plain.c, plain.sandbox).claim).toBeDefined();
    const withTools = observed({ tools }, missing);
    expect(claimPlanOf(withTools.c, withTools.sandbox)).toEqual({ gaps: [] });
  });

  it.each([
    [undefined, 'Disallowed'],
    ['Disallowed', 'Disallowed'],
  ])(
    'refuses a template whose envVarsInjectionPolicy is %s, naming the fields',
    (policy, shown) => {
      const { c, sandbox } = observed({ tools }, { template: template(policy) });
      const plan = claimPlanOf(c, sandbox);
      expect(plan.claim).toBeUndefined();
      expect(plan.gaps).toEqual([
        {
          field: 'spec.tools.mcpServers and spec.tools.requireApproval',
          message: `SandboxTemplate polychrome-harness has envVarsInjectionPolicy ${shown}, so a SandboxClaim cannot give the harness spec.tools.mcpServers and spec.tools.requireApproval: set spec.envVarsInjectionPolicy: Allowed on the template (config/sandbox does), or use backend pod`,
        },
      ]);
    },
  );

  it('needs Overrides to change a variable the template sets itself, and merges it as the pod backend does', () => {
    const own = [{ name: 'HARNESS_REQUIRE_APPROVAL', value: 'shell' }];
    const allowed = observed({ tools }, { template: template('Allowed', own) });
    const refused = claimPlanOf(allowed.c, allowed.sandbox);
    expect(refused.claim).toBeUndefined();
    expect(refused.gaps.map((g) => g.message)).toEqual([
      expect.stringContaining(
        'sets HARNESS_REQUIRE_APPROVAL itself, and envVarsInjectionPolicy Allowed lets a claim add variables, not change them',
      ),
    ]);
    const overrides = observed({ tools }, { template: template('Overrides', own) });
    const plan = claimPlanOf(overrides.c, overrides.sandbox);
    expect(plan.gaps).toEqual([]);
    expect(plan.claim?.spec.env).toContainEqual({
      name: 'HARNESS_REQUIRE_APPROVAL',
      value: 'shell memory tickets/close_ticket',
      containerName: 'harness',
    });
  });

  it('refuses envFrom under Allowed (agent-sandbox would reject the claim)', () => {
    const { c, sandbox } = observed(
      { tools },
      { template: template('Allowed', [], { envFrom: [{ secretRef: { name: 's' } }] }) },
    );
    expect(claimPlanOf(c, sandbox).gaps.map((g) => g.message)).toEqual([
      expect.stringContaining('uses envFrom'),
    ]);
  });

  it('refuses approval rules a template reads through valueFrom: a claim carries plain values only', () => {
    const { c, sandbox } = observed(
      { tools },
      {
        template: template('Overrides', [
          {
            name: 'HARNESS_REQUIRE_APPROVAL',
            valueFrom: { configMapKeyRef: { name: 'r', key: 'k' } },
          },
        ]),
      },
    );
    const plan = claimPlanOf(c, sandbox);
    expect(plan.claim).toBeUndefined();
    expect(plan.gaps.map((g) => g.field)).toEqual(['spec.tools.requireApproval']);
  });

  it('refuses MCP servers a template reads through valueFrom (the merge cannot see them)', () => {
    const { c, sandbox } = observed(
      { tools: { mcpServers: [tickets] } },
      {
        template: template('Overrides', [
          { name: 'HARNESS_MCP_SERVERS', valueFrom: { configMapKeyRef: { name: 'm', key: 'k' } } },
        ]),
      },
    );
    const plan = claimPlanOf(c, sandbox);
    expect(plan.claim).toBeUndefined();
    expect(plan.gaps).toEqual([
      {
        field: 'spec.tools.mcpServers',
        message:
          "SandboxTemplate polychrome-harness (container harness) sets HARNESS_MCP_SERVERS through valueFrom, so the conversation's MCP servers (spec.tools.mcpServers) cannot be merged into it: set it inline in the template as a JSON array, or remove it there",
      },
    ]);
  });

  it('honours spec.sandbox.template only when it is the template the pool names', () => {
    const same = observed({
      sandbox: { backend: 'agent-sandbox', template: 'polychrome-harness' },
    });
    expect(claimPlanOf(same.c, same.sandbox).gaps).toEqual([]);
    const other = observed({ sandbox: { backend: 'agent-sandbox', template: 'big-harness' } });
    const plan = claimPlanOf(other.c, other.sandbox);
    expect(plan.claim).toBeUndefined();
    expect(plan.gaps).toEqual([
      {
        field: 'spec.sandbox.template',
        message:
          "spec.sandbox.template is big-harness, but SandboxWarmPool polychrome-harness draws from SandboxTemplate polychrome-harness and a claim takes the pool's template: set spec.sandbox.warmPool to a pool of big-harness, or remove spec.sandbox.template",
      },
    ]);
  });

  it('honours spec.sandbox.resources only when the template already sets them', () => {
    const resources = { requests: { cpu: '250m' }, limits: { cpu: 1 } };
    const sized = template('Allowed', [], {
      resources: { requests: { cpu: '250m', memory: '1Gi' }, limits: { cpu: '1' } },
    });
    const ok = observed({ sandbox: { backend: 'agent-sandbox', resources } }, { template: sized });
    expect(claimPlanOf(ok.c, ok.sandbox).claim).toBeDefined();
    const bigger = observed(
      { sandbox: { backend: 'agent-sandbox', resources: { limits: { cpu: '2', memory: '1Gi' } } } },
      { template: sized },
    );
    const plan = claimPlanOf(bigger.c, bigger.sandbox);
    expect(plan.claim).toBeUndefined();
    expect(plan.gaps).toEqual([
      {
        field: 'spec.sandbox.resources',
        message:
          'spec.sandbox.resources asks limits.cpu 2 (the template: 1), limits.memory 1Gi (the template: none) for container harness of SandboxTemplate polychrome-harness, and a SandboxClaim cannot change resources: set them in the template, remove spec.sandbox.resources, or use backend pod',
      },
    ]);
  });
});

describe('sameClaimEnv', () => {
  const a: ClaimEnvVar = { name: 'A', value: '1', containerName: 'harness' };
  it('compares name, value and container, in order', () => {
    expect(sameClaimEnv([a], [{ ...a }])).toBe(true);
    expect(sameClaimEnv([], undefined)).toBe(true);
    expect(sameClaimEnv([a], [{ ...a, value: '2' }])).toBe(false);
    expect(sameClaimEnv([a], [{ ...a, containerName: 'other' }])).toBe(false);
    expect(sameClaimEnv([a, { name: 'B', value: '' }], [{ name: 'B', value: '' }, a])).toBe(false);
  });
});
