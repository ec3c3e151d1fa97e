import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Role } from '../../common/persona-roles';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { repoRoot } from '../../hack/lib/paths';
import { startTestHttpMcpServer, type TestHttpMcpServer } from '../support/mcp-servers/http-server';
import { conversations, field } from './support/kube';
import { apiCall, type ApiAnswer, type ApiCallOptions } from './support/public-api';
import { sandboxExtensions } from './support/sandbox';
import { isReady, startTurnStack, type TurnStack } from './support/turn-stack';

// config/samples/conversation-full.yaml end to end on the agent-sandbox backend: the real
// agent-sandbox controller built by hack/ turns the operator's SandboxClaim into a Sandbox
// and its pod, the local node runs that pod as a harness process, and turns go through the
// real control plane and state plane. The sample is applied as it is written except for
// one value: its `tickets` MCP server points at a cluster Service that does not exist here
// (http://tickets.support.svc:8080/mcp), so the test substitutes the URL of a real MCP
// server over streamable HTTP on loopback. The `everything` server is the sample's own
// command (`npx -y @modelcontextprotocol/server-everything`, installed in node_modules).

const SAMPLE = join(repoRoot, 'config', 'samples', 'conversation-full.yaml');
const SAMPLE_TICKETS_URL = 'http://tickets.support.svc:8080/mcp';

type Conditions = { type: string; status: string; reason: string; message: string }[];

describe('config/samples/conversation-full.yaml on the agent-sandbox backend', () => {
  let stack: TurnStack;
  let tickets: TestHttpMcpServer;
  let owner: string;
  let admin: string;
  let uid: string;
  let name: string;

  const call = (method: string, path: string, options: ApiCallOptions = {}): Promise<ApiAnswer> =>
    apiCall(stack.apiUrl, method, path, options);
  const post = (text: string, key: string): Promise<ApiAnswer> =>
    call('POST', `/v1/conversations/${uid}/messages`, {
      token: owner,
      body: { text, idempotencyKey: key },
    });

  beforeAll(async () => {
    tickets = await startTestHttpMcpServer();
    stack = await startTurnStack({ namespacePrefix: 'full', agentSandbox: true });
    const sample = parse(await readFile(SAMPLE, 'utf8')) as {
      metadata: { name: string };
      spec: { owner: string; tools: { mcpServers: { name: string; url?: string }[] } };
    };
    const server = sample.spec.tools.mcpServers.find((s) => s.name === 'tickets');
    expect(server?.url).toBe(SAMPLE_TICKETS_URL);
    server!.url = tickets.url;
    name = sample.metadata.name;
    owner = await stack.mintToken(sample.spec.owner);
    admin = await stack.mintToken('test:full-admin', [Role.Admin]);
    const { api, group, version, plural } = conversations(stack.admin);
    const created: unknown = await api.createNamespacedCustomObject({
      group,
      version,
      plural,
      namespace: stack.namespace,
      body: sample,
    });
    uid = String(field(created, 'metadata', 'uid'));
    await stack.waitConversation(name, isReady, 120_000);
  }, 240_000);
  afterAll(async () => {
    await stack?.stop();
    await tickets?.kill();
  });

  it('gives the harness its MCP servers and approval rules through the SandboxClaim env', async () => {
    await stack.withDiagnostics(async () => {
      const claim: unknown = await stack.admin
        .makeApiClient(CustomObjectsApi)
        .getNamespacedCustomObject({
          ...sandboxExtensions,
          namespace: stack.namespace,
          plural: 'sandboxclaims',
          name,
        });
      const env = field(claim, 'spec', 'env') as { name: string; value: string }[];
      expect(env.map((e) => e.name)).toEqual(['HARNESS_MCP_SERVERS', 'HARNESS_REQUIRE_APPROVAL']);
      expect(env[1]?.value).toBe('calculator tickets/close_ticket everything/*');
      // agent-sandbox put them in the pod it made; the pod is the Sandbox's, named after it.
      const status = field(await stack.conversation(name), 'status', 'sandbox') as {
        podName: string;
      };
      const pod = await stack.admin
        .makeApiClient(CoreV1Api)
        .readNamespacedPod({ namespace: stack.namespace, name: status.podName });
      expect(pod.metadata?.ownerReferences?.map((o) => o.kind)).toEqual(['Sandbox']);
      const harness = pod.spec?.containers.find((c) => c.name === 'harness');
      const servers = JSON.parse(
        harness?.env?.find((e) => e.name === 'HARNESS_MCP_SERVERS')?.value ?? '[]',
      ) as { name: string; url?: string }[];
      expect(servers.map((s) => s.name)).toEqual(['everything', 'tickets']);
      expect(servers[1]?.url).toBe(tickets.url);
      const conditions = field(
        await stack.conversation(name),
        'status',
        'conditions',
      ) as Conditions;
      expect(conditions.find((c) => c.type === 'Degraded')).toMatchObject({
        status: 'False',
        reason: 'Healthy',
      });
    });
  });

  it('runs a turn that calls a tool of the sample MCP server tickets, which no rule gates', async () => {
    await stack.withDiagnostics(async () => {
      const answer = await post('look it up [[tool:tickets/echo {}]]', 'k-tickets');
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({
        status: 'complete',
        reply: 'tool tickets/echo said: echo over http',
      });
      expect(await stack.journalKinds(uid)).toEqual(
        expect.arrayContaining(['tool_call', 'tool_result', 'turn_complete']),
      );
    });
  });

  it('pauses a call that everything/* gates, and completes the turn once an admin approves', async () => {
    await stack.withDiagnostics(async () => {
      const paused = await post('say [[tool:everything/echo {"message":"hi"}]]', 'k-gated');
      expect(paused.status).toBe(200);
      expect(paused.body).toMatchObject({ status: 'paused', conversationId: uid });
      const card = paused.body.approval as Record<string, unknown>;
      expect(card).toMatchObject({ toolName: 'everything/echo', args: { message: 'hi' } });
      const approved = await call(
        'POST',
        `/v1/conversations/${uid}/approvals/${String(card.requestId)}`,
        { token: admin, body: { decision: 'approve' } },
      );
      expect(approved.status).toBe(200);
      expect(approved.body).toMatchObject({ status: 'complete', turnId: paused.body.turnId });
      expect(String(approved.body.reply)).toMatch(/^tool everything\/echo said: .*hi/);
      const kinds = await stack.journalKinds(uid);
      expect(kinds).toEqual(expect.arrayContaining(['approval_request', 'approval_response']));
      expect((await stack.verify(uid)).ok).toBe(true);
    });
  });
});
