/**
 * The control plane process: load config, build logger and clients, connect to the state
 * plane, wire the reconciler and leases, serve the side port, stop on SIGTERM.
 */
import { loadPaymentConfig, type PaymentConfig } from './payments/payment-config';
import { KubeConfig } from '@kubernetes/client-node';
import { readFile } from 'node:fs/promises';
import { Registry } from 'prom-client';
import { collectProcessMetrics } from '../common/process-metrics';
import { conversationsGauge, createControlPlaneMetrics } from './control-plane-metrics';
import { ConfigError } from '../common/config';
import { HealthServer } from '../common/health-server';
import { componentLogger, createRootLogger, LogComponent } from '../common/log';
import { PersonaPaymentPolicies } from './turns/persona-payment-policy';
import { RecordsClient } from '../common/records-client';
import { StateClient } from '../common/state-client';
import { startTracing } from '../common/tracing';
import { loadHarnessCa } from './harness-ca';
import { loadControlPlaneConfig } from './config';
import { runProvisioner } from './provisioner-process';
import { loadSummaryConfig, summaryModelClient } from './summary-config';
import { createAgentResourcesController, createModelRelay } from './agent-resources-wiring';
import { ConversationController } from './controller/conversation-controller';
import { HarnessEgressController } from './controller/harness-egress-controller';
import { KubeDoor } from './kube-api/kube-door';
import { kubeDoorPorts, tokenReviewer } from './kube-api/kube-door-ports';
import { UiAssets } from './ui/ui-assets';
import { KubeListener } from './kube-api/kube-listener';
import { kubeRecordsResources } from './kube-api/kube-records-resources';
import { ServingCertificate } from '../common/serving-certificate';
import {
  eitherAuthenticator,
  serviceAccountAuthenticator,
} from './kube-api/service-account-tokens';
import { ConversationLeases } from './lease/conversation-leases';
import { journalRetirement } from './retention/journal-retirement';
import { leaseOwnership } from './lease/lease-ownership';
import { stateJournalFollower } from './public-api/journal-follower';
import { PeerEndpoints } from './public-api/peer-endpoints';
import { ConversationForensics } from './forensics/conversation-forensics';
import { PublicApiServer } from './public-api/public-api-server';
import { countOwnedConversations } from './public-api/caller-limits';
import { recordsAuthenticator } from './public-api/records-authenticator';
import { StateLink } from './state-link';
import { loadStateLinkCertificate, peerTlsFrom } from './state-link-tls';
import { ApprovalSigner } from './turns/approval-signer';
import { ConversationAccess } from './turns/conversation-access';
import { TurnCoordinator } from './turns/coordinator';
import { HarnessConnector } from './turns/harness-client';
import { HarnessCredentialMinter } from './turns/harness-credentials';
import { tracedTurnService } from './turns/traced-turn-service';
import { TurnResumer } from './turns/turn-resumer';

async function main(): Promise<void> {
  const config = loadControlPlaneConfig();
  const log = createRootLogger({ service: 'control-plane', level: config.logLevel });
  const mainLog = componentLogger(log, LogComponent.Main, { identity: config.identity });
  // Before any span: the SDK loads only when OTEL_* asks for it (docs/observability.md).
  const tracing = await startTracing('polychrome-control-plane', (message) =>
    mainLog.warn(message),
  );

  const kc = new KubeConfig();
  if (config.kubeconfigPath === undefined) kc.loadFromCluster();
  else kc.loadFromFile(config.kubeconfigPath);
  const registry = new Registry();
  collectProcessMetrics(registry);
  const metrics = createControlPlaneMetrics(registry);

  // Secrets first: a missing key file stops the process before it takes any work.
  const approvals = await ApprovalSigner.fromFile(config.turns.approvalKeyPath);
  const summaryConfig = loadSummaryConfig();
  const summaryModel =
    summaryConfig === undefined
      ? undefined
      : await summaryModelClient(
          summaryConfig,
          componentLogger(log, LogComponent.Turn, { source: 'anthropic-sdk' }),
        );
  // The approval key also mints each call's harness credential, under its own domain.
  const credentials = HarnessCredentialMinter.fromPem(
    await readFile(config.turns.approvalKeyPath, 'utf8'),
    'POLYCHROME_APPROVAL_KEY_FILE',
  );
  // Read again while it runs: a rotated harness CA needs no restart.
  const harnessCa = await loadHarnessCa(
    { caPath: config.turns.harnessCaPath, intervalMs: config.state.reloadIntervalMs },
    mainLog,
    registry,
  );
  // Every conversation's Lease is in this namespace, out of reach of conversations' users.
  const leases = new ConversationLeases({
    kubeConfig: kc,
    namespace: config.lease.namespace,
    identity: config.identity,
    leaseDurationMs: config.lease.durationMs,
    renewIntervalMs: config.lease.renewIntervalMs,
    requestTimeoutMs: config.lease.requestTimeoutMs,
    onTransition: (event, handle) => {
      metrics.leaseEvents.inc({ event });
      // Acquired at start or later, or taken over from a replica that died or was rolled:
      // an interrupted turn there is resumed with no request (docs/turns.md).
      if (event === 'acquired' || event === 'taken_over') resumer.wake(handle.conversation.uid);
      if (event !== 'renewed') {
        mainLog.info(
          {
            event,
            namespace: handle.conversation.namespace,
            conversation: handle.conversation.name,
            fencingToken: handle.fencingToken,
          },
          'conversation lease changed',
        );
      }
    },
  });
  // HTTPS egress for harness pods, except to the API server (docs/operator.md, "Harness egress").
  const egress = new HarnessEgressController({
    kubeConfig: kc,
    logger: log,
    ...(config.watchNamespace === undefined ? {} : { namespace: config.watchNamespace }),
  });
  // Read again while it runs: a renewed certificate or CA bundle needs no restart.
  const stateCertificate = await loadStateLinkCertificate(config.state, mainLog, registry);
  const stateOptions = {
    address: config.state.address,
    tls: stateCertificate,
    ...(config.state.serverName === undefined ? {} : { serverName: config.state.serverName }),
  };
  const state = new StateClient(stateOptions);
  const retireJournal = journalRetirement({
    journal: state,
    leases,
    defaultPolicy: config.journalRetention,
    identity: config.identity,
    log: componentLogger(log, LogComponent.Journal),
  });
  const controller = new ConversationController({
    kubeConfig: kc,
    onConversationNamespace: (namespace) => egress.addNamespace(namespace),
    logger: log,
    workers: config.workers,
    agentSandbox: config.agentSandbox,
    ...(config.watchNamespace === undefined ? {} : { namespace: config.watchNamespace }),
    ...(config.harnessImage === undefined ? {} : { harnessImage: config.harnessImage }),
    // Only the lease holder writes a conversation's children and status.
    ownership: leaseOwnership(leases),
    // Its journal follows spec.journalRetention (under its lease), then its Lease, in this
    // namespace where no owner reference reaches it, goes: both before the finalizer.
    beforeFinalizerRemoved: async (ref) => {
      await retireJournal(ref);
      await leases.retire(ref);
    },
    afterDeleted: (ref) => leases.forget(ref),
    onPass: ({ result, durationMs }) => {
      metrics.passes.inc({ result });
      metrics.passSeconds.observe(durationMs / 1000);
    },
    events: {
      reportingInstance: config.identity,
      onWrite: (result) => metrics.kubeEvents.inc({ result }),
    },
  });
  const agents = createAgentResourcesController(kc, log, config, metrics);
  conversationsGauge(registry, () => controller.knownConversations());

  const records = new RecordsClient(stateOptions);
  const harness = new HarnessConnector({ harnessCa, credentials });
  const conversations = new ConversationAccess({
    kubeConfig: kc,
    cached: () => controller.knownConversations(),
    cachedByName: (namespace, name) => controller.knownConversation(namespace, name),
    newConversation: {
      namespace: config.turns.newConversationNamespace,
      spec: config.turns.newConversationSpec,
    },
  });
  const coordinator = new TurnCoordinator({
    state,
    harness,
    leases,
    approvals,
    conversations,
    identities: {
      isAdmin: async (identity, signal) =>
        (await records.findPersonaByIdentity(identity, { signal }))?.roles.includes('admin') ??
        false,
    },
    identity: config.identity,
    logger: componentLogger(log, LogComponent.Turn),
    sandboxWaitMs: config.turns.sandboxWaitMs,
    maxAttempts: config.turns.maxAttempts,
    statusIntervalMs: config.turns.statusIntervalMs,
    statusDelayMs: config.turns.statusDelayMs,
    approvalTtlMs: config.turns.approvalTtlMs,
    allowSelfApproval: config.turns.allowSelfApproval,
    ...(config.turns.maxSteps === 0 ? {} : { deploymentMaxSteps: config.turns.maxSteps }),
    memoryBudgetBytes: config.turns.memoryBudgetBytes,
    historyTokens: config.turns.historyTokens,
    ...(summaryModel === undefined ? {} : { summaryModel }),
    agentDirectory: (namespace) => agents.directory(namespace),
    modelRelay: createModelRelay(kc, config), // relayed agents' model calls, keys from Secrets
    ...paymentsOption(loadPaymentConfig(kc, config.peer.namespace)), // off unless configured
    personaPayments: records, // a persona's wallet, limits and totals (docs/payments.md)
    observer: {
      onTurn: (outcome, seconds) => {
        metrics.turns.inc({ outcome });
        metrics.turnSeconds.observe(seconds);
      },
      onCommit: (seconds) => metrics.commitSeconds.observe(seconds),
      onStatusWrite: (result) => metrics.statusWrites.inc({ result }),
      onSummary: (outcome) => metrics.summaries.inc({ outcome }),
    },
  });
  // Woken by the leases above (after start: the resumer exists by then).
  const resumer = new TurnResumer({
    resume: (uid, signal) => coordinator.resume(uid, signal),
    conversations,
    state,
    logger: componentLogger(log, LogComponent.Turn),
    onResumed: (outcome) => metrics.turnsResumed.inc({ outcome }),
  });
  // Where the other replicas' peer listeners are: their Pods, in this namespace only.
  const peerEndpoints = new PeerEndpoints({
    kubeConfig: kc,
    namespace: config.peer.namespace,
    log: componentLogger(log, LogComponent.Api),
  });
  const door =
    config.kubeApi === undefined
      ? undefined
      : new KubeDoor({
          ports: kubeDoorPorts({
            kubeConfig: kc,
            cachedByName: (namespace, name) => controller.knownConversation(namespace, name),
          }),
          logger: componentLogger(log, LogComponent.Api),
        });
  // Read again every minute: cert-manager renews it into the mounted Secret.
  const servingCertificate =
    config.kubeApi === undefined
      ? undefined
      : await ServingCertificate.load({
          certPath: config.kubeApi.certPath,
          keyPath: config.kubeApi.keyPath,
          logger: componentLogger(log, LogComponent.Api),
          purpose: "the Kubernetes door's serving certificate",
          remedy: 'check the Secret mounted there (docs/kube-api.md, "The serving certificate")',
        });
  const api = new PublicApiServer({
    host: config.api.host,
    port: config.api.port,
    service: tracedTurnService(coordinator),
    personaPolicies: new PersonaPaymentPolicies(records),
    forensics: new ConversationForensics({
      journal: state,
      conversations,
      holder: coordinator,
      approvalKey: { keyId: approvals.keyId, publicKey: approvals.publicKey },
    }),
    // With the Kubernetes door installed, an in-cluster edge may also present its
    // ServiceAccount's projected token (audience polychrome), checked by a TokenReview.
    authenticate:
      door === undefined
        ? recordsAuthenticator(records)
        : eitherAuthenticator(
            recordsAuthenticator(records),
            serviceAccountAuthenticator({ review: tokenReviewer(kc), records }),
          ),
    follow: stateJournalFollower(state),
    logger: log,
    registry,
    authFailureCacheMs: config.limits.authFailureCacheMs,
    // Conversations a caller owns: the informer cache's, in the namespace the API creates in.
    limits: {
      settings: config.limits,
      ownedConversations: (identity) =>
        countOwnedConversations(
          controller.knownConversations(),
          config.turns.newConversationNamespace,
          identity,
        ),
    },
    // The state-plane link's certificate is the control plane's identity: replicas
    // present it to each other too.
    peers: {
      host: config.peer.host,
      port: config.peer.port,
      ...peerTlsFrom(stateCertificate),
      directory: peerEndpoints,
    },
    ...(door === undefined || config.kubeApi === undefined || servingCertificate === undefined
      ? {}
      : {
          kube: new KubeListener({
            host: config.kubeApi.host,
            port: config.kubeApi.port,
            ...servingCertificate.pair,
            onCertificateChange: (listener) => servingCertificate.onChange(listener),
            door,
            // The same records link (and certificate) the authenticator uses: no new credential.
            ...kubeRecordsResources(records, door),
            // The forensics UI's bundle, read once (docs/ui.md).
            ui: await UiAssets.load(),
          }),
        }),
  });
  const link = new StateLink(state, componentLogger(log, LogComponent.Journal));
  let started = false;
  const health = new HealthServer({
    host: config.health.host,
    port: config.health.port,
    registry,
    isReady: () => started && link.isUp(),
  });
  await health.start();

  const stopping = new AbortController();
  let shuttingDown = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (shuttingDown) return;
    shuttingDown = true;
    started = false;
    stopping.abort(new Error(`received ${signal}`));
    mainLog.info({ signal }, 'shutting down');
    const grace = setTimeout(() => {
      mainLog.error({ graceMs: config.shutdownGraceMs }, 'shutdown grace period over; exiting');
      process.exit(1);
    }, config.shutdownGraceMs);
    grace.unref();
    // Drain (docs/operator.md, "Shutdown"): readiness is false already; no new turn starts
    // here (503, retry on another replica), and the turns in flight get most of the grace
    // period to finish, their callers and streams answered as usual.
    const { drainMs, closeMs } = shutdownBudget(config.shutdownGraceMs);
    resumer.close();
    await coordinator.drain(drainMs);
    // Then turns still running are cancelled and left for the next holder, which resumes
    // them (their callers get 503); streams end so their clients reconnect elsewhere.
    await coordinator.close(Math.floor(closeMs / 2));
    servingCertificate?.stop();
    stateCertificate.stop();
    harnessCa.stop();
    await api.close();
    await peerEndpoints.close();
    harness.close();
    await Promise.all([controller.close(), agents.close()]);
    await egress.close();
    // Released leases let the other replicas take over at once instead of after expiry.
    await leases.close();
    link.close();
    records.close();
    state.close();
    await health.close();
    await tracing?.shutdown().catch(() => undefined);
    mainLog.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));

  mainLog.info({ state: config.state.address }, 'connecting to the state plane');
  stateCertificate.start();
  harnessCa.start();
  await link.connect(stopping.signal);
  leases.start();
  await egress.start();
  await Promise.all([controller.start(), agents.start()]);
  await peerEndpoints.start();
  await api.start();
  servingCertificate?.start();
  started = true;
  mainLog.info(
    { health: config.health.port, api: config.api.port, peer: config.peer.port },
    'control plane started',
  );
}

/**
 * How SIGTERM's grace period is spent: the turns in flight may run for all of it but a
 * reserve (a quarter, at most 5 s), which is left for cancelling the rest, flushing status
 * and releasing the Leases before the process must exit.
 */
function shutdownBudget(graceMs: number): { drainMs: number; closeMs: number } {
  const closeMs = Math.min(5_000, Math.floor(graceMs / 4));
  return { drainMs: graceMs - closeMs, closeMs };
}

// `provision`: the provisioner's Deployment runs this image for its Secrets (operator/provision).
(process.argv[2] === 'provision' ? runProvisioner() : main()).catch((err: unknown) => {
  // Before the logger exists (bad config) the message goes to stderr as it is.
  console.error(err instanceof ConfigError || err instanceof Error ? err.message : err);
  process.exit(1);
});

/** The coordinator's `payments`, present only when payments are configured. */
function paymentsOption(payments: PaymentConfig | undefined): { payments?: PaymentConfig } {
  return payments === undefined ? {} : { payments };
}
