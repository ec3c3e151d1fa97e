/**
 * The whole system for end-to-end turn tests, on real parts: in a fresh namespace of the
 * shared cluster (or of a cluster given in {@link TurnStackOptions.cluster}, e.g. one a
 * benchmark started), a real state-plane process over mutual TLS, hack's local node running
 * each harness pod as a real `node --import tsx harness/main.ts` process (the Anthropic SDK
 * inside pointed at a local Messages API server), and N real control-plane processes as
 * the operator's ServiceAccount.
 *
 * @example
 * let stack: TurnStack;
 * beforeAll(async () => { stack = await startTurnStack({ controlPlanes: 2 }); });
 * afterAll(() => stack?.stop());
 * it('answers', () => stack.withDiagnostics(async () => {
 *   const uid = await stack.createConversation('c1');
 *   const token = await stack.mintToken('test:alice', ['admin']);
 *   // ... POST to stack.apiUrl with the token ...
 *   expect((await stack.verify(uid)).ok).toBe(true);
 * }));
 */
import { Role } from '../../../common/persona-roles';
import { partitionOf } from '../../../common/partition-name';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1Pod,
} from '@kubernetes/client-node';
import { parse } from 'yaml';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPrivateKey } from 'node:crypto';
import { RecordsClient } from '../../../common/records-client';
import { loadStateClientTls, type StateClientTls } from '../../../common/state-channel';
import { StateClient } from '../../../common/state-client';
import { StateCallError } from '../../../common/state-call-errors';
import type { JournalEntry, VerifyOutcome } from '../../../common/state-journal';
import { ensureDevCerts, type DevCerts } from '../../../hack/lib/dev-certs';
import { ensureHarnessCa, ensureHarnessCertificate } from '../../../hack/lib/harness-pki';
import type { DevCertificateAuthority } from '../../../hack/lib/pki';
import {
  applyHarnessSecret,
  applyHarnessTlsSecret,
  ed25519PublicKeyHex,
  ensureApprovalKey,
  HARNESS_IMAGE_PATTERN,
  harnessSourceCommand,
  sandboxHarnessPodSpec,
  type ApprovalKey,
  type EnvEntry,
  type HarnessPodSpec,
} from '../../../hack/lib/harness-config';
import { repoRoot } from '../../../hack/lib/paths';
import { type LocalCluster } from '../../../hack/lib/local-cluster';
import { LocalNode } from '../../../hack/lib/local-node';
import { isAlive, pollUntil } from '../../../hack/lib/processes';
import { createNodeEd25519Verifier } from '../../../state/journal/node-ed25519';
import { nodeSha256 } from '../../../state/journal/node-sha256';
import { verifyJournal } from '../../../state/journal/verify-journal';
import type { JournalVerification } from '../../../state/journal/verification-types';
import { echoResponder, MessagesApiServer } from '../../support/messages-api-server';
import { ControlPlaneProcess, controlPlaneKubeconfig } from './control-plane';
import {
  conversations,
  dropConversationFinalizers,
  field,
  freshNamespace,
  kubeConfig,
  sharedCluster,
} from './kube';
import { PeerPods } from './peer-pods';
import { LineLog, tailOf } from './process-logs';
import { ensureRuntimeClass, sandboxExtensions } from './sandbox';
import { StatePlane } from './state-plane';

/** The harness PodTemplate the pod backend reads (the Conversation default). */
export const HARNESS_POD_TEMPLATE = 'polychrome-harness';

/** Options of {@link startTurnStack}. */
export interface TurnStackOptions {
  /**
   * The cluster to run in, with the CRDs installed. The stack does not stop a cluster it
   * was given (it deletes its namespace and node as always).
   * @default the jest integration project's shared cluster
   */
  readonly cluster?: LocalCluster;
  /** Control-plane replicas, named `<namespace>-cp-0`, `<namespace>-cp-1`, ... @default 1 */
  readonly controlPlanes?: number;
  /** Prefix of the namespace's name. @default 'turns' */
  readonly namespacePrefix?: string;
  /**
   * The model API the harnesses call. The stack does not close a server it was given.
   * @default a new server answering with {@link echoResponder}, closed by `stop`
   */
  readonly messages?: MessagesApiServer;
  /** More variables for every control plane (they win), e.g. `POLYCHROME_TURN_MAX_ATTEMPTS`. */
  readonly controlPlaneEnv?: Readonly<Record<string, string>>;
  /** More variables for every harness container (they win), e.g. `HARNESS_MAX_STEPS`. */
  readonly harnessEnv?: Readonly<Record<string, string>>;
  /** More variables for the state plane, e.g. `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly stateEnv?: Readonly<Record<string, string>>;
  /** Conversation lease duration of the control planes. @default 3000 */
  readonly leaseDurationMs?: number;
  /** Wait until every control plane is ready before resolving. @default true */
  readonly waitReady?: boolean;
  /** How long the whole start may take. @default 90_000 */
  readonly timeoutMs?: number;
  /**
   * Also run the agent-sandbox backend: the control planes watch claims and Sandboxes, and
   * the namespace gets config/sandbox's SandboxTemplate `polychrome-harness` (its pod spec
   * changed as the PodTemplate's is) and a SandboxWarmPool of that name with no replicas.
   * @default false
   */
  readonly agentSandbox?: boolean;
}

/** The default spec of {@link TurnStack.createConversation} (pod backend). */
export const DEFAULT_CONVERSATION_SPEC: Readonly<Record<string, unknown>> = Object.freeze({
  agent: { systemPrompt: 'You are a test agent. Be brief.' },
  sandbox: { backend: 'pod' },
});

/** Where a conversation's harness runs. */
export interface HarnessInfo {
  readonly podName: string;
  readonly podUid: string;
  /** The pod's loopback address. */
  readonly podIP: string;
  /** The harness process's pid, when it runs on the stack's node. */
  readonly pid: number | undefined;
  /** The container log file the local node writes. */
  readonly logPath: string;
}

/** Both verifications of a journal: the state plane's and one offline with the pinned key. */
export interface JournalCheck {
  /** Server and offline verification passed and no event is unsealed. */
  readonly ok: boolean;
  readonly events: number;
  /** The state plane's `Verify`. */
  readonly server: VerifyOutcome;
  /** state/journal's verifier over `Read`, trusting only the stack's signing key. */
  readonly offline: JournalVerification;
}

/** A running stack; see the module comment. Stop it with {@link TurnStack.stop}. */
export class TurnStack {
  /** Every control plane, started or not, in creation order. */
  readonly controlPlanes: ControlPlaneProcess[] = [];
  /** Lines of the local node. */
  readonly nodeLog = new LineLog(2_000);
  private namespaceHandle: { name: string; dispose: () => Promise<void> } | undefined;
  private dirPath: string | undefined;
  private devCerts: DevCerts | undefined;
  private statePlane: StatePlane | undefined;
  private localNode: LocalNode | undefined;
  private messagesServer: MessagesApiServer | undefined;
  private ownsMessages = false;
  private operatorKubeconfig = '';
  private approval: ApprovalKey | undefined;
  private harnessAuthority: DevCertificateAuthority | undefined;
  private stopping: Promise<void> | undefined;
  private planesNamed = 0;
  private peerPods: PeerPods | undefined;

  private constructor(
    /** Admin client of the cluster (the shared one unless one was given). */
    readonly admin: KubeConfig,
    private readonly options: TurnStackOptions,
  ) {}

  /** @internal use {@link startTurnStack} */
  static async start(options: TurnStackOptions = {}): Promise<TurnStack> {
    const admin = options.cluster?.kubeConfig() ?? (await kubeConfig());
    const stack = new TurnStack(admin, options);
    const timeoutMs = options.timeoutMs ?? 90_000;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        stack.bringUp(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`the turn stack did not start within ${timeoutMs} ms`)),
            timeoutMs,
          );
        }),
      ]);
    } catch (err: unknown) {
      const diagnostics = await stack.diagnostics().catch(() => '');
      await stack.stop().catch(() => undefined);
      const message = err instanceof Error ? err.message : String(err);
      throw new Error(`${message}\n${diagnostics}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
    return stack;
  }

  // ---- what runs ----

  /** The stack's namespace (Conversations, the harness Secret and PodTemplate, pods). */
  get namespace(): string {
    return this.required(this.namespaceHandle, 'namespace').name;
  }

  /** The temporary directory everything writes to; removed by {@link stop}. */
  get dir(): string {
    return this.required(this.dirPath, 'dir');
  }

  /** The dev PKI of the state plane link, the journal signing key and the records key. */
  get certs(): DevCerts {
    return this.required(this.devCerts, 'certs');
  }

  /** The state-plane process (restart, kill). */
  get state(): StatePlane {
    return this.required(this.statePlane, 'state plane');
  }

  /** The local node running the harness pods. */
  get node(): LocalNode {
    return this.required(this.localNode, 'local node');
  }

  /** The Messages API server the harnesses call. */
  get messages(): MessagesApiServer {
    return this.required(this.messagesServer, 'messages server');
  }

  /** The control planes' approval key pair. */
  get approvalKey(): ApprovalKey {
    return this.required(this.approval, 'approval key');
  }

  /** The harness CA (`POLYCHROME_HARNESS_CA_FILE`): it signs the namespace's harness certificate. */
  get harnessCa(): DevCertificateAuthority {
    return this.required(this.harnessAuthority, 'harness CA');
  }

  /** The first control plane's public API. */
  get apiUrl(): string {
    return this.controlPlane(0).apiUrl;
  }

  /** The control planes' Pods in polychrome-system, one per replica process. */
  get peers(): PeerPods {
    return this.required(this.peerPods, 'peer pods');
  }

  /** The control plane at `index`. */
  controlPlane(index = 0): ControlPlaneProcess {
    return this.required(this.controlPlanes[index], `control plane ${index}`);
  }

  /**
   * Creates and starts one more control plane (`<namespace>-cp-<n>`) with the same settings.
   * @param wait wait until it is ready @default true
   */
  async addControlPlane(wait = true): Promise<ControlPlaneProcess> {
    // Named before the first await: planes started together must not share an identity.
    // The identity is its Pod's name in polychrome-system, which every stack shares.
    const identity = `${this.namespace}-cp-${this.planesNamed++}`;
    const plane = await ControlPlaneProcess.create({
      identity,
      kubeconfig: this.operatorKubeconfig,
      namespace: this.namespace,
      certs: this.certs,
      stateAddress: this.state.address,
      harnessCaFile: this.harnessCa.certPath,
      approvalKeyFile: this.approvalKey.privateKeyPath,
      peerNamespace: this.peers.namespace,
      ...(this.options.leaseDurationMs === undefined
        ? {}
        : { leaseDurationMs: this.options.leaseDurationMs }),
      env: {
        POLYCHROME_NEW_CONVERSATION_SPEC: JSON.stringify(DEFAULT_CONVERSATION_SPEC),
        ...(this.options.agentSandbox === true ? { POLYCHROME_AGENT_SANDBOX: 'true' } : {}),
        ...this.options.controlPlaneEnv,
      },
    });
    this.assertNotStopped();
    // Its Pod, as its Deployment and a kubelet would write it.
    await this.peers.register(identity, plane.peerPort);
    this.controlPlanes.push(plane);
    plane.start();
    if (wait) await plane.waitReady();
    return plane;
  }

  // ---- helpers ----

  /**
   * A bearer token for `identity`: its persona (created with `roles`, or the existing one
   * given those roles) and a new session, through the state plane's Records service with
   * the records-admin certificate, as the development tooling mints them.
   */
  async mintToken(identity: string, roles: readonly Role[] = [Role.Member]): Promise<string> {
    const records = new RecordsClient({
      address: this.state.address,
      tls: await this.tls('recordsAdmin'),
      callTimeoutMs: 10_000,
    });
    try {
      let persona = await records.findPersonaByIdentity(identity);
      if (persona === undefined) {
        persona = await records.createPersona({
          displayName: identity,
          roles,
          identities: [identity],
        });
      } else if ([...persona.roles].sort().join() !== [...roles].sort().join()) {
        persona = await records.setRoles(persona.id, roles, {
          expectedVersion: persona.version,
          setBy: 'test:turn-stack',
        });
      }
      return (await records.createSession(persona.id, { mintedBy: 'test:turn-stack' })).token;
    } finally {
      records.close();
    }
  }

  /**
   * Creates a ModelConfig `model` (no key: the control plane's relay sends its placeholder,
   * as `MessagesApiServer.start({apiKey: NO_KEY})` expects) and the Agents `agents`, by
   * name, each on that ModelConfig with the system prompt `You are <name>.` unless its
   * spec says otherwise (docs/operator.md, "Agents and ModelConfigs").
   */
  async createAgents(
    model: { name: string; model: string; baseUrl: string },
    agents: Readonly<Record<string, Readonly<Record<string, unknown>>>>,
  ): Promise<void> {
    const objects = this.admin.makeApiClient(CustomObjectsApi);
    const create = (plural: string, kind: string, name: string, spec: object) =>
      objects.createNamespacedCustomObject({
        group: 'polychrome.dev',
        version: 'v1alpha1',
        namespace: this.namespace,
        plural,
        body: { apiVersion: 'polychrome.dev/v1alpha1', kind, metadata: { name }, spec },
      });
    await create('modelconfigs', 'ModelConfig', model.name, {
      provider: 'anthropic',
      model: model.model,
      baseUrl: model.baseUrl,
    });
    for (const [name, spec] of Object.entries(agents)) {
      await create('agents', 'Agent', name, {
        modelRef: { name: model.name },
        systemPrompt: `You are ${name}.`,
        ...spec,
      });
    }
  }

  /**
   * Creates a Conversation (pod backend; `spec` fields replace the defaults', the backend
   * stays `pod`) and waits until the operator reports it Ready with its harness running.
   *
   * @returns its uid (the journal is `conv-<uid>`).
   */
  async createConversation(
    name: string,
    spec: Readonly<Record<string, unknown>> = {},
    timeoutMs = 60_000,
  ): Promise<string> {
    const { api, group, version, plural } = conversations(this.admin);
    const sandbox: unknown = spec.sandbox;
    const created: unknown = await api.createNamespacedCustomObject({
      group,
      version,
      plural,
      namespace: this.namespace,
      body: {
        apiVersion: `${group}/${version}`,
        kind: 'Conversation',
        metadata: { name },
        spec: {
          ...DEFAULT_CONVERSATION_SPEC,
          ...spec,
          sandbox: { ...(isRecord(sandbox) ? sandbox : {}), backend: 'pod' },
        },
      },
    });
    await this.waitConversation(name, (obj) => isReady(obj), timeoutMs);
    return String(field(created, 'metadata', 'uid'));
  }

  /** The Conversation object `name` as the API server returns it. */
  async conversation(name: string): Promise<unknown> {
    const { api, group, version, plural } = conversations(this.admin);
    return api.getNamespacedCustomObject({
      group,
      version,
      plural,
      namespace: this.namespace,
      name,
    });
  }

  /**
   * Waits until the Conversation `name` satisfies `check` (Ready with an endpoint by
   * default); a timeout error shows its status and the stack's diagnostics.
   */
  async waitConversation(
    name: string,
    check: (obj: unknown) => boolean = isReady,
    timeoutMs = 60_000,
  ): Promise<unknown> {
    let last: unknown;
    try {
      return await pollUntil(
        `Conversation ${this.namespace}/${name}`,
        async () => {
          last = await this.conversation(name);
          return check(last) ? last : undefined;
        },
        { timeoutMs, intervalMs: 250 },
      );
    } catch (err: unknown) {
      const message = err instanceof Error ? err.message : String(err);
      throw new Error(
        `${message}\nstatus: ${JSON.stringify(field(last, 'status'))}\n${await this.diagnostics()}`,
        { cause: err },
      );
    }
  }

  /** The harness of Conversation `name` (the pod backend's pod has the same name). */
  async harness(name: string): Promise<HarnessInfo> {
    const pod: V1Pod = await this.admin
      .makeApiClient(CoreV1Api)
      .readNamespacedPod({ namespace: this.namespace, name });
    const uid = pod.metadata?.uid ?? '';
    return {
      podName: name,
      podUid: uid,
      podIP: pod.status?.podIP ?? '',
      pid: this.node.pidOf(uid, 'harness'),
      logPath: this.node.logPath({ namespace: this.namespace, name, uid }, 'harness'),
    };
  }

  /**
   * Sends `signal` to the harness process of Conversation `name` (the local node restarts
   * it after its back-off, as a kubelet restarts a crashed container).
   * @returns the pid it signalled.
   * @throws Error when no harness process runs for it on the stack's node.
   */
  async killHarness(name: string, signal: NodeJS.Signals = 'SIGKILL'): Promise<number> {
    const { pid } = await this.harness(name);
    if (pid === undefined) throw new Error(`no harness process runs for Conversation ${name}`);
    process.kill(pid, signal);
    return pid;
  }

  /**
   * State-plane calls of `method` finished so far, every status summed
   * (`polychrome_state_calls_total` on the state plane's /metrics).
   */
  async stateCalls(method: string): Promise<number> {
    const url = `http://127.0.0.1:${String(this.state.healthPort)}/metrics`;
    const text = await (await fetch(url)).text();
    let total = 0;
    for (const line of text.split('\n')) {
      if (line.startsWith('polychrome_state_calls_total{') && line.includes(`method="${method}"`)) {
        total += Number(line.slice(line.lastIndexOf(' ') + 1));
      }
    }
    return total;
  }

  /** Every committed event of the conversation's journal, read as the verifier identity. */
  async journal(uid: string): Promise<JournalEntry[]> {
    const client = new StateClient({
      address: this.state.address,
      tls: await this.tls('verifier'),
      callTimeoutMs: 10_000,
    });
    try {
      const events: JournalEntry[] = [];
      for await (const entry of client.read(partitionOf(uid), 0, 0, {
        signal: AbortSignal.timeout(30_000),
      })) {
        events.push(entry);
      }
      return events;
    } catch (err: unknown) {
      if (err instanceof StateCallError && err.code === 'not_found') return [];
      throw err;
    } finally {
      client.close();
    }
  }

  /** The kinds of {@link journal}'s events, in order. */
  async journalKinds(uid: string): Promise<string[]> {
    return (await this.journal(uid)).map((e) => e.kind);
  }

  /**
   * Verifies the conversation's journal twice: by the state plane (`Verify`) and offline
   * with state/journal's verifier, trusting only the stack's journal signing key.
   */
  async verify(uid: string): Promise<JournalCheck> {
    const events = await this.journal(uid);
    const client = new StateClient({
      address: this.state.address,
      tls: await this.tls('verifier'),
      callTimeoutMs: 30_000,
    });
    let server: VerifyOutcome;
    try {
      server = await client.verify(partitionOf(uid));
    } finally {
      client.close();
    }
    const signingKey = createPrivateKey(await readFile(this.certs.signingKey));
    const offline = verifyJournal(events, {
      hash: nodeSha256,
      // Version-2 roots name their partition; the offline check verifies as this one.
      partition: partitionOf(uid),
      verifier: createNodeEd25519Verifier(),
      trustedPublicKeys: [Buffer.from(ed25519PublicKeyHex(signingKey), 'hex')],
    });
    return {
      ok: server.ok && offline.ok && server.unsealed === 0 && offline.unsealed.count === 0,
      events: events.length,
      server,
      offline,
    };
  }

  /**
   * What to read when something went wrong: each process's last lines, the node's, every
   * harness log and every Conversation's phase.
   */
  async diagnostics(lines = 30): Promise<string> {
    const parts: string[] = [];
    if (this.statePlane !== undefined) {
      parts.push(`--- state plane (last ${lines}) ---`, this.statePlane.tail(lines));
    }
    for (const plane of this.controlPlanes) {
      parts.push(`--- ${plane.identity} (last ${lines}) ---`, plane.tail(lines));
    }
    parts.push(`--- local node (last ${lines}) ---`, tailOf(this.nodeLog.lines, lines));
    if (this.namespaceHandle !== undefined) {
      try {
        const { api, group, version, plural } = conversations(this.admin);
        const list: unknown = await api.listNamespacedCustomObject({
          group,
          version,
          plural,
          namespace: this.namespace,
        });
        const items = field(list, 'items');
        for (const item of Array.isArray(items) ? items : []) {
          const name = String(field(item, 'metadata', 'name'));
          parts.push(`--- Conversation ${name}: ${JSON.stringify(field(item, 'status'))}`);
          const logPath = await this.harness(name).then(
            (h) => h.logPath,
            () => undefined,
          );
          if (logPath !== undefined && existsSync(logPath)) {
            const text = await readFile(logPath, 'utf8');
            parts.push(
              `--- harness of ${name} (last ${lines}) ---`,
              tailOf(text.split('\n'), lines),
            );
          }
        }
      } catch (err: unknown) {
        parts.push(
          `(could not list conversations: ${err instanceof Error ? err.message : String(err)})`,
        );
      }
    }
    return parts.join('\n');
  }

  /**
   * Runs `body`; when it fails, the error's message gets {@link diagnostics} appended, so
   * the test report shows the processes' last lines.
   */
  async withDiagnostics<T>(body: () => Promise<T>): Promise<T> {
    try {
      return await body();
    } catch (err: unknown) {
      const diagnostics = await this.diagnostics().catch(() => '');
      if (err instanceof Error) {
        err.message = `${err.message}\n${diagnostics}`;
        throw err;
      }
      throw new Error(`${String(err)}\n${diagnostics}`, { cause: err });
    }
  }

  /**
   * Stops everything (control planes, harnesses, the node, the state plane, the model
   * server when the stack started it), deletes the namespace and the temporary directory.
   * Idempotent; every step runs even when an earlier one fails, and the first failure is
   * thrown at the end.
   */
  stop(): Promise<void> {
    this.stopping ??= this.tearDown();
    return this.stopping;
  }

  // ---- internals ----

  private async bringUp(): Promise<void> {
    const cluster = this.options.cluster ?? (await sharedCluster());
    this.namespaceHandle = await freshNamespace(
      this.admin,
      this.options.namespacePrefix ?? 'turns',
    );
    this.dirPath = await mkdtemp(join(tmpdir(), 'turn-stack-'));
    const dir = this.dirPath;
    if (this.options.messages === undefined) {
      this.messagesServer = await MessagesApiServer.start({ respond: echoResponder });
      this.ownsMessages = true;
    } else {
      this.messagesServer = this.options.messages;
    }
    const [certs, operatorKubeconfig, approval, harnessCa] = await Promise.all([
      ensureDevCerts(join(dir, 'pki')),
      controlPlaneKubeconfig(cluster),
      ensureApprovalKey(join(dir, 'approval-key.pem')),
      ensureHarnessCa(join(dir, 'harness-pki')),
      ensureRuntimeClass(this.admin),
    ]);
    this.devCerts = certs;
    this.operatorKubeconfig = operatorKubeconfig;
    this.approval = approval;
    this.harnessAuthority = harnessCa;
    this.statePlane = await StatePlane.create(certs, join(dir, 'state-data'));
    Object.assign(this.statePlane.env, this.options.stateEnv);
    // After controlPlaneKubeconfig applied config/ (the namespace and the peers' Role).
    this.peerPods = new PeerPods(this.admin);

    // The state plane starts while the harness objects are written and the node registers.
    const state = this.statePlane;
    this.assertNotStopped();
    const stateUp = state.start().then(async () => {
      // Started after stop() gave up waiting (start timed out): stop it here.
      if (this.stopping !== undefined) await state.kill('SIGKILL');
    });
    await Promise.all([stateUp, this.writeHarnessObjects(), this.startNode()]);
    const count = this.options.controlPlanes ?? 1;
    const planes: Promise<ControlPlaneProcess>[] = [];
    for (let i = 0; i < count; i++) planes.push(this.addControlPlane(false));
    const started = await Promise.all(planes);
    if (this.options.waitReady ?? true) await Promise.all(started.map((p) => p.waitReady()));
  }

  /** The Secrets and the PodTemplate `polychrome-harness` (config/sandbox's pod spec). */
  private async writeHarnessObjects(): Promise<void> {
    const namespace = this.namespace;
    await applyHarnessTlsSecret(
      this.admin,
      namespace,
      await ensureHarnessCertificate(this.harnessCa, namespace),
    );
    await applyHarnessSecret(this.admin, namespace, {
      approvalPublicKey: this.approvalKey.publicKeyHex,
      anthropicApiKey: this.messages.apiKey,
    });
    const spec = await sandboxHarnessPodSpec();
    const extra = this.options.harnessEnv ?? {};
    const env: EnvEntry[] = [
      { name: 'ANTHROPIC_BASE_URL', value: this.messages.url },
      ...Object.entries(extra).map(([name, value]) => ({ name, value })),
    ];
    const replaced = new Set(env.map((e) => e.name));
    spec.containers = spec.containers.map((container) => {
      if (container.name !== 'harness') return container;
      return {
        ...container,
        env: [
          // The Anthropic provider, not the demo script.
          ...(container.env ?? []).filter(
            (e) => e.name !== 'HARNESS_MODEL_SCRIPT' && !replaced.has(e.name),
          ),
          ...env,
        ],
        // Ready within a second of listening, not at the next 5 s probe.
        readinessProbe: {
          httpGet: { path: '/readyz', port: 9090 },
          periodSeconds: 1,
          failureThreshold: 1,
        },
      };
    });
    spec.terminationGracePeriodSeconds = 5;
    if (this.options.agentSandbox === true) await this.writeSandboxTemplate(spec);
    await this.admin.makeApiClient(CoreV1Api).createNamespacedPodTemplate({
      namespace,
      body: {
        metadata: { name: HARNESS_POD_TEMPLATE },
        template: {
          metadata: { labels: { 'app.kubernetes.io/name': 'polychrome-harness' } },
          spec,
        },
      },
    });
  }

  /**
   * config/sandbox's SandboxTemplate with `podSpec` for its pod spec, and a warm pool of no
   * replicas (no idle harness processes on a shared machine; a claim with env starts a
   * fresh Sandbox whatever the pool holds).
   */
  private async writeSandboxTemplate(podSpec: HarnessPodSpec): Promise<void> {
    const objects = this.admin.makeApiClient(CustomObjectsApi);
    const doc: unknown = parse(
      await readFile(join(repoRoot, 'config', 'sandbox', 'sandbox-template.yaml'), 'utf8'),
    );
    const shipped = isRecord(doc) && isRecord(doc.spec) ? doc.spec : {};
    const podTemplate = isRecord(shipped.podTemplate) ? shipped.podTemplate : {};
    const apiVersion = `${sandboxExtensions.group}/${sandboxExtensions.version}`;
    await objects.createNamespacedCustomObject({
      ...sandboxExtensions,
      namespace: this.namespace,
      plural: 'sandboxtemplates',
      body: {
        apiVersion,
        kind: 'SandboxTemplate',
        metadata: { name: HARNESS_POD_TEMPLATE },
        spec: { ...shipped, podTemplate: { ...podTemplate, spec: podSpec } },
      },
    });
    await objects.createNamespacedCustomObject({
      ...sandboxExtensions,
      namespace: this.namespace,
      plural: 'sandboxwarmpools',
      body: {
        apiVersion,
        kind: 'SandboxWarmPool',
        metadata: { name: HARNESS_POD_TEMPLATE },
        spec: { replicas: 0, sandboxTemplateRef: { name: HARNESS_POD_TEMPLATE } },
      },
    });
  }

  private async startNode(): Promise<void> {
    this.localNode = new LocalNode({
      kubeConfig: this.admin,
      name: `turns-${this.namespace}`,
      stateDir: join(this.dir, 'node'),
      namespaces: [this.namespace],
      images: { [HARNESS_IMAGE_PATTERN]: harnessSourceCommand() },
      cwd: repoRoot,
      maxGracePeriodSeconds: 5,
      backoff: { initialMs: 1_000, maxMs: 5_000 },
      log: (line) => this.nodeLog.add(line),
    });
    this.assertNotStopped();
    await this.localNode.start();
  }

  private async tls(identity: 'recordsAdmin' | 'verifier'): Promise<StateClientTls> {
    const files = this.certs[identity];
    return loadStateClientTls({
      ca: this.certs.ca.certPath,
      cert: files.certPath,
      key: files.keyPath,
    });
  }

  private async tearDown(): Promise<void> {
    const failures: unknown[] = [];
    const step = async (what: () => Promise<unknown>): Promise<void> => {
      try {
        await what();
      } catch (err: unknown) {
        failures.push(err);
      }
    };
    // Control planes first (SIGTERM releases their leases), then what they drive.
    await Promise.all(this.controlPlanes.map((p) => step(() => p.kill('SIGTERM', 8_000))));
    if (this.namespaceHandle !== undefined) {
      await step(() => dropConversationFinalizers(this.admin, this.namespace));
    }
    if (this.localNode !== undefined) {
      const node = this.localNode;
      await step(() => node.close());
      await step(() => deleteNode(this.admin, node.name));
    }
    if (this.statePlane !== undefined) {
      const state = this.statePlane;
      await step(() => state.kill('SIGTERM', 8_000));
    }
    if (this.ownsMessages && this.messagesServer !== undefined) {
      const server = this.messagesServer;
      await step(() => server.close());
    }
    if (this.peerPods !== undefined) {
      const peers = this.peerPods;
      await step(() => peers.dispose());
    }
    if (this.namespaceHandle !== undefined) {
      const ns = this.namespaceHandle;
      await step(() => ns.dispose());
    }
    if (this.dirPath !== undefined) {
      const dir = this.dirPath;
      await step(() => rm(dir, { recursive: true, force: true }));
    }
    // Nothing of ours may outlive the stack.
    for (const plane of this.controlPlanes) {
      const pid = plane.child?.pid;
      if (pid !== undefined && isAlive(pid) && plane.running) plane.child?.kill('SIGKILL');
    }
    if (failures.length > 0) throw failures[0];
  }

  /** Refuses to start anything once {@link stop} was called (e.g. a start that timed out). */
  private assertNotStopped(): void {
    if (this.stopping !== undefined) throw new Error('the turn stack is stopping');
  }

  private required<T>(value: T | undefined, what: string): T {
    if (value === undefined) throw new Error(`the turn stack has no ${what} (not started yet?)`);
    return value;
  }
}

/** Starts a {@link TurnStack}; on failure stops whatever started and throws with diagnostics. */
export function startTurnStack(options: TurnStackOptions = {}): Promise<TurnStack> {
  return TurnStack.start(options);
}

/** True when a Conversation object is Ready and names its harness endpoint. */
export function isReady(obj: unknown): boolean {
  return (
    field(obj, 'status', 'phase') === 'Ready' &&
    typeof field(obj, 'status', 'sandbox', 'endpoint') === 'string'
  );
}

async function deleteNode(kc: KubeConfig, name: string): Promise<void> {
  try {
    await kc.makeApiClient(CoreV1Api).deleteNode({ name });
  } catch (err: unknown) {
    if (!(err instanceof ApiException && err.code === 404)) throw err;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
