import { describe, expect, it } from '@jest/globals';
import type { ToolsSpec } from '../api/v1alpha1/conversation-spec';
import {
  builtInHarnessPodSpec,
  desiredPod,
  podSpecHash,
  type EnvVarManifest,
  type PodSpecManifest,
} from './desired-pod';
import { UID, conversation } from './snapshot-fixtures';

describe('desiredPod', () => {
  const c = conversation({ sandbox: { backend: 'pod' } });

  it('uses the hardened built-in spec when there is no PodTemplate', () => {
    const pod = desiredPod({ conversation: c, harnessImage: 'img:1' });
    expect(pod.metadata.name).toBe('c1');
    expect(pod.metadata.namespace).toBe('team');
    expect(pod.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'polychrome.dev/v1alpha1',
        kind: 'Conversation',
        name: 'c1',
        uid: UID,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(pod.metadata.labels['polychrome.dev/conversation-uid']).toBe(UID);
    expect(pod.spec).toMatchObject({
      runtimeClassName: 'gvisor',
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
    });
    expect(pod.spec.containers[0]).toMatchObject({
      name: 'harness',
      image: 'img:1',
      ports: [
        { name: 'grpc', containerPort: 7070, protocol: 'TCP' },
        { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
      ],
      securityContext: {
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        runAsNonRoot: true,
        capabilities: { drop: ['ALL'] },
      },
      resources: { requests: { cpu: '100m', memory: '256Mi' } },
    });
    expect(pod.metadata.annotations['polychrome.dev/pod-spec-hash']).toBe(podSpecHash(pod.spec));
  });

  it('takes a PodTemplate spec, forces automountServiceAccountToken off, applies resources', () => {
    const templateSpec = {
      automountServiceAccountToken: true,
      containers: [
        { name: 'sidecar' },
        { name: 'harness', image: 'mine', resources: { limits: { cpu: '1' } } },
      ],
    };
    const pod = desiredPod({
      conversation: conversation({
        sandbox: { backend: 'pod', resources: { limits: { memory: '2Gi' }, requests: { cpu: 2 } } },
      }),
      templateSpec,
      harnessImage: 'unused',
    });
    expect(pod.spec.automountServiceAccountToken).toBe(false);
    expect(pod.spec.containers).toEqual([
      { name: 'sidecar' },
      {
        name: 'harness',
        image: 'mine',
        resources: { limits: { cpu: '1', memory: '2Gi' }, requests: { cpu: '2' } },
      },
    ]);
    expect(templateSpec.automountServiceAccountToken).toBe(true);
  });

  it('changes the spec hash when the spec changes, and only then', () => {
    const a = desiredPod({ conversation: c, harnessImage: 'img:1' });
    const b = desiredPod({ conversation: c, harnessImage: 'img:1' });
    const other = desiredPod({ conversation: c, harnessImage: 'img:2' });
    expect(a.metadata.annotations).toEqual(b.metadata.annotations);
    expect(other.metadata.annotations).not.toEqual(a.metadata.annotations);
    expect(builtInHarnessPodSpec('x').volumes).toEqual([
      { name: 'tmp', emptyDir: { sizeLimit: '256Mi' } },
    ]);
  });
});

describe("desiredPod: the conversation's tools in the harness container env", () => {
  const files = {
    name: 'files',
    transport: 'stdio' as const,
    command: '/usr/local/bin/mcp-files',
    args: ['--root', '/tmp'],
    timeoutMs: 60_000,
  };
  const github = {
    name: 'github',
    transport: 'http' as const,
    url: 'https://mcp.example.com/github',
    timeoutMs: 5_000,
  };
  const filesJson = {
    name: 'files',
    transport: 'stdio',
    command: '/usr/local/bin/mcp-files',
    args: ['--root', '/tmp'],
    timeoutMs: 60_000,
  };
  const githubJson = {
    name: 'github',
    transport: 'http',
    url: 'https://mcp.example.com/github',
    timeoutMs: 5_000,
  };
  const podIp: EnvVarManifest = {
    name: 'POD_IP',
    valueFrom: { fieldRef: { fieldPath: 'status.podIP' } },
  };
  const token: EnvVarManifest = {
    name: 'HARNESS_APPROVAL_PUBLIC_KEY',
    valueFrom: { secretKeyRef: { name: 'polychrome-harness', key: 'approval-public-key' } },
  };
  const rulesFromConfigMap = { configMapKeyRef: { name: 'deployment-rules', key: 'rules' } };

  /** A template whose harness container (second, after a sidecar) has `env`. */
  function template(env: EnvVarManifest[] | undefined): PodSpecManifest {
    return {
      containers: [
        { name: 'sidecar', env: [{ name: 'SIDECAR', value: 'untouched' }] },
        { name: 'harness', image: 'mine', ...(env === undefined ? {} : { env }) },
      ],
    };
  }

  it.each<
    [string, ToolsSpec | undefined, EnvVarManifest[] | undefined, EnvVarManifest[] | undefined]
  >([
    ['no tools: no env', undefined, undefined, undefined],
    [
      'builtin tools only: the template env as it was',
      { builtin: ['calculator'] },
      [token],
      [token],
    ],
    [
      'MCP servers: HARNESS_MCP_SERVERS as the harness config reads it',
      { mcpServers: [files, github] },
      undefined,
      [{ name: 'HARNESS_MCP_SERVERS', value: JSON.stringify([filesJson, githubJson]) }],
    ],
    [
      'a server without optional fields',
      { mcpServers: [{ name: 'bare', transport: 'stdio', command: 'mcp-bare' }] },
      undefined,
      [
        {
          name: 'HARNESS_MCP_SERVERS',
          value: '[{"name":"bare","transport":"stdio","command":"mcp-bare"}]',
        },
      ],
    ],
    [
      'approval rules: HARNESS_REQUIRE_APPROVAL, space separated',
      { builtin: ['calculator'], mcpServers: [files], requireApproval: ['calculator', 'files/*'] },
      undefined,
      [
        { name: 'HARNESS_MCP_SERVERS', value: JSON.stringify([filesJson]) },
        { name: 'HARNESS_REQUIRE_APPROVAL', value: 'calculator files/*' },
      ],
    ],
    [
      'the template env is kept, in order, before the added variables',
      { mcpServers: [github], requireApproval: ['github/create_issue'] },
      [podIp, token],
      [
        podIp,
        token,
        { name: 'HARNESS_MCP_SERVERS', value: JSON.stringify([githubJson]) },
        { name: 'HARNESS_REQUIRE_APPROVAL', value: 'github/create_issue' },
      ],
    ],
    [
      "an inline template HARNESS_REQUIRE_APPROVAL: the template's rules, then the spec's",
      { mcpServers: [github], requireApproval: ['github/create_issue'] },
      [{ name: 'HARNESS_REQUIRE_APPROVAL', value: 'files/*, refund' }, token],
      [
        { name: 'HARNESS_REQUIRE_APPROVAL', value: 'files/*, refund github/create_issue' },
        token,
        { name: 'HARNESS_MCP_SERVERS', value: JSON.stringify([githubJson]) },
      ],
    ],
    [
      'a template HARNESS_REQUIRE_APPROVAL from valueFrom: kept under another name and referenced',
      { mcpServers: [github], requireApproval: ['github/*'] },
      [token, { name: 'HARNESS_REQUIRE_APPROVAL', valueFrom: rulesFromConfigMap }],
      [
        token,
        { name: 'POLYCHROME_TEMPLATE_REQUIRE_APPROVAL', valueFrom: rulesFromConfigMap },
        {
          name: 'HARNESS_REQUIRE_APPROVAL',
          value: '$(POLYCHROME_TEMPLATE_REQUIRE_APPROVAL) github/*',
        },
        { name: 'HARNESS_MCP_SERVERS', value: JSON.stringify([githubJson]) },
      ],
    ],
    [
      "an inline template HARNESS_MCP_SERVERS: its servers, then the spec's it does not name",
      { mcpServers: [files, github] },
      [
        {
          name: 'HARNESS_MCP_SERVERS',
          value: '[{"name":"files","transport":"http","url":"http://files/mcp"}]',
        },
      ],
      [
        {
          name: 'HARNESS_MCP_SERVERS',
          value: JSON.stringify([
            { name: 'files', transport: 'http', url: 'http://files/mcp' },
            githubJson,
          ]),
        },
      ],
    ],
    [
      'a template HARNESS_MCP_SERVERS from valueFrom cannot be read: kept, nothing added',
      { mcpServers: [github] },
      [{ name: 'HARNESS_MCP_SERVERS', valueFrom: { configMapKeyRef: { name: 'm', key: 'k' } } }],
      [{ name: 'HARNESS_MCP_SERVERS', valueFrom: { configMapKeyRef: { name: 'm', key: 'k' } } }],
    ],
  ])('%s', (_label, tools, templateEnv, expected) => {
    const c = conversation({
      sandbox: { backend: 'pod' },
      ...(tools === undefined ? {} : { tools }),
    });
    const fromTemplate = desiredPod({
      conversation: c,
      templateSpec: template(templateEnv),
      harnessImage: 'unused',
    });
    expect(fromTemplate.spec.containers[0]).toEqual({
      name: 'sidecar',
      env: [{ name: 'SIDECAR', value: 'untouched' }],
    });
    expect(fromTemplate.spec.containers[1]?.env).toEqual(expected);
    if (templateEnv === undefined) {
      // The built-in spec has no env of its own: the same variables, on its harness container.
      const builtIn = desiredPod({ conversation: c, harnessImage: 'img:1' });
      expect(builtIn.spec.containers[0]?.env).toEqual(expected);
    }
  });

  it('does not modify the template', () => {
    const spec = template([{ name: 'HARNESS_REQUIRE_APPROVAL', value: 'refund' }]);
    const before = JSON.stringify(spec);
    desiredPod({
      conversation: conversation({
        sandbox: { backend: 'pod' },
        tools: { mcpServers: [files], requireApproval: ['files/*'] },
      }),
      templateSpec: spec,
      harnessImage: 'unused',
    });
    expect(JSON.stringify(spec)).toBe(before);
  });

  it('changes the spec hash when spec.tools changes what the harness is told, so the pod is replaced', () => {
    const hash = (tools?: ToolsSpec): string | undefined =>
      desiredPod({
        conversation: conversation({
          sandbox: { backend: 'pod' },
          ...(tools === undefined ? {} : { tools }),
        }),
        harnessImage: 'img:1',
      }).metadata.annotations['polychrome.dev/pod-spec-hash'];
    const none = hash();
    expect(hash({ builtin: ['calculator'] })).toBe(none);
    const withServer = hash({ mcpServers: [files] });
    expect(withServer).not.toBe(none);
    expect(hash({ mcpServers: [{ ...files, args: ['--root', '/data'] }] })).not.toBe(withServer);
    expect(hash({ mcpServers: [files], requireApproval: ['files/*'] })).not.toBe(withServer);
  });
});
