import { describe, expect, it } from '@jest/globals';
import { ConfigError } from '../common/config';
import { loadControlPlaneConfig } from './config';

const base = {
  POLYCHROME_STATE_ADDRESS: 'polychrome-state:7443',
  POLYCHROME_STATE_CA: '/tls/ca.crt',
  POLYCHROME_STATE_CERT: '/tls/tls.crt',
  POLYCHROME_STATE_KEY: '/tls/tls.key',
  POLYCHROME_HARNESS_CA_FILE: '/harness-ca/ca.crt',
  POLYCHROME_APPROVAL_KEY_FILE: '/approval/key.pem',
};

describe('loadControlPlaneConfig', () => {
  it('fills the defaults', () => {
    const c = loadControlPlaneConfig({ ...base, POD_NAME: 'cp-0' });
    expect(c).toMatchObject({
      identity: 'cp-0',
      kubeconfigPath: undefined,
      health: { host: '0.0.0.0', port: 9090 },
      lease: { namespace: 'polychrome-system', durationMs: 15_000, renewIntervalMs: 5_000 },
      workers: 2,
      agentSandbox: true,
      logLevel: 'info',
    });
    expect(Object.isFrozen(c.state)).toBe(true);
    expect(c.api).toEqual({ host: '0.0.0.0', port: 8080 });
    expect(c.peer).toEqual({ host: '0.0.0.0', port: 8443, namespace: 'polychrome-system' });
    expect(c.turns).toMatchObject({
      newConversationNamespace: 'polychrome-conversations',
      newConversationSpec: {},
      sandboxWaitMs: 120_000,
      maxAttempts: 3,
      approvalTtlMs: 24 * 3_600_000,
      allowSelfApproval: false,
    });
  });

  it('never creates conversations in default: refused with the variable named, whichever variable says so', () => {
    for (const extra of [
      { POLYCHROME_NEW_CONVERSATION_NAMESPACE: 'default' },
      { POLYCHROME_WATCH_NAMESPACE: 'default' },
    ]) {
      expect(() => loadControlPlaneConfig({ ...base, ...extra })).toThrow(
        /POLYCHROME_NEW_CONVERSATION_NAMESPACE: conversations the API creates would land in "default".*polychrome-conversations/u,
      );
    }
    // Watching default is fine when the API creates conversations elsewhere.
    expect(
      loadControlPlaneConfig({
        ...base,
        POLYCHROME_WATCH_NAMESPACE: 'default',
        POLYCHROME_NEW_CONVERSATION_NAMESPACE: 'team-a',
      }).turns.newConversationNamespace,
    ).toBe('team-a');
  });

  it('allows self-approval only when POLYCHROME_ALLOW_SELF_APPROVAL says so', () => {
    const allow = (value: string): boolean =>
      loadControlPlaneConfig({ ...base, POLYCHROME_ALLOW_SELF_APPROVAL: value }).turns
        .allowSelfApproval;
    expect(allow('true')).toBe(true);
    expect(allow('false')).toBe(false);
    expect(() => allow('sometimes')).toThrow('POLYCHROME_ALLOW_SELF_APPROVAL');
  });

  it('reads the approval time to live as a duration and refuses anything else by name', () => {
    const ttl = (value: string): number =>
      loadControlPlaneConfig({ ...base, POLYCHROME_APPROVAL_TTL: value }).turns.approvalTtlMs;
    expect(ttl('90m')).toBe(90 * 60_000);
    expect(ttl('2d')).toBe(2 * 24 * 3_600_000);
    expect(ttl('1500ms')).toBe(1_500);
    for (const bad of ['24', '1.5h', '-1h', '500ms', '31d', 'soon']) {
      expect(() => ttl(bad)).toThrow(
        new RegExp(
          `POLYCHROME_APPROVAL_TTL: must be a duration from 1s to 30d.*got "${bad.replace('.', '\\.')}"`,
        ),
      );
    }
  });

  it('looks for its peers and keeps its leases in its own namespace, and takes the default agent as JSON', () => {
    const c = loadControlPlaneConfig({
      ...base,
      POD_NAMESPACE: 'polychrome-prod',
      POLYCHROME_PEER_PORT: '9443',
      POLYCHROME_API_PORT: '8081',
      POLYCHROME_WATCH_NAMESPACE: 'team-a',
      POLYCHROME_NEW_CONVERSATION_SPEC: '{"agent":{"model":"claude-sonnet-5-5"}}',
    });
    expect(c.peer).toMatchObject({ port: 9443, namespace: 'polychrome-prod' });
    // The leases follow the control plane's namespace, never the watched one.
    expect(c.lease.namespace).toBe('polychrome-prod');
    expect(
      loadControlPlaneConfig({ ...base, POD_NAMESPACE: 'a', POLYCHROME_NAMESPACE: 'b' }).peer
        .namespace,
    ).toBe('b');
    expect(
      loadControlPlaneConfig({ ...base, POD_NAMESPACE: 'a', POLYCHROME_NAMESPACE: 'b' }).lease
        .namespace,
    ).toBe('b');
    expect(c.turns.newConversationNamespace).toBe('team-a');
    expect(c.turns.newConversationSpec).toEqual({ agent: { model: 'claude-sonnet-5-5' } });
    expect(() =>
      loadControlPlaneConfig({ ...base, POLYCHROME_NEW_CONVERSATION_SPEC: '{"agent":' }),
    ).toThrow(/POLYCHROME_NEW_CONVERSATION_SPEC: is not valid JSON/);
  });

  it('knows its ServiceAccount, in its own namespace, for the Secret grants it asks for', () => {
    expect(loadControlPlaneConfig(base).serviceAccount).toEqual({
      name: 'polychrome-control-plane',
      namespace: 'polychrome-system',
    });
    expect(
      loadControlPlaneConfig({
        ...base,
        POD_NAMESPACE: 'platform',
        POLYCHROME_SERVICE_ACCOUNT: 'polychrome-cp',
      }).serviceAccount,
    ).toEqual({ name: 'polychrome-cp', namespace: 'platform' });
  });

  it('requires the harness token and the approval key', () => {
    const { POLYCHROME_HARNESS_CA_FILE: _t, POLYCHROME_APPROVAL_KEY_FILE: _k, ...rest } = base;
    expect(() => loadControlPlaneConfig(rest)).toThrow(
      /POLYCHROME_APPROVAL_KEY_FILE[\s\S]*POLYCHROME_HARNESS_CA_FILE|POLYCHROME_HARNESS_CA_FILE[\s\S]*POLYCHROME_APPROVAL_KEY_FILE/,
    );
  });

  it('prefers an explicit identity over the pod name', () => {
    expect(
      loadControlPlaneConfig({ ...base, POD_NAME: 'cp-0', POLYCHROME_IDENTITY: 'me' }).identity,
    ).toBe('me');
  });

  it('reports every bad variable at once', () => {
    let caught: unknown;
    try {
      loadControlPlaneConfig({
        POLYCHROME_STATE_ADDRESS: 'no-port',
        POLYCHROME_WORKERS: 'many',
        POLYCHROME_LOG_LEVEL: 'loud',
      });
    } catch (err: unknown) {
      caught = err;
    }
    if (!(caught instanceof ConfigError)) throw new Error('expected a ConfigError');
    const issues = caught.issues.map((i) => i.variable).sort();
    expect(issues).toEqual([
      'POLYCHROME_APPROVAL_KEY_FILE',
      'POLYCHROME_HARNESS_CA_FILE',
      'POLYCHROME_LOG_LEVEL',
      'POLYCHROME_STATE_CA',
      'POLYCHROME_STATE_CERT',
      'POLYCHROME_STATE_KEY',
      'POLYCHROME_WORKERS',
    ]);
    expect(caught.message).toMatch(
      /POLYCHROME_WORKERS: must be a whole number from 1 to 64, got "many"/,
    );
  });

  it('rejects a renew interval that is not shorter than the lease', () => {
    expect(() =>
      loadControlPlaneConfig({
        ...base,
        POLYCHROME_LEASE_DURATION_MS: '5000',
        POLYCHROME_LEASE_RENEW_MS: '5000',
      }),
    ).toThrow(
      /POLYCHROME_LEASE_RENEW_MS: must be shorter than POLYCHROME_LEASE_DURATION_MS \(5000\), got 5000/,
    );
  });

  it('defaults the lease request timeout to a third of the lease, at most 5 s, and refuses one as long as the lease', () => {
    expect(loadControlPlaneConfig(base).lease.requestTimeoutMs).toBe(5_000);
    expect(
      loadControlPlaneConfig({
        ...base,
        POLYCHROME_LEASE_DURATION_MS: '3000',
        POLYCHROME_LEASE_RENEW_MS: '1000',
      }).lease.requestTimeoutMs,
    ).toBe(1_000);
    expect(
      loadControlPlaneConfig({ ...base, POLYCHROME_LEASE_REQUEST_TIMEOUT_MS: '2500' }).lease
        .requestTimeoutMs,
    ).toBe(2_500);
    expect(() =>
      loadControlPlaneConfig({
        ...base,
        POLYCHROME_LEASE_DURATION_MS: '5000',
        POLYCHROME_LEASE_REQUEST_TIMEOUT_MS: '5000',
      }),
    ).toThrow(
      /POLYCHROME_LEASE_REQUEST_TIMEOUT_MS: must be shorter than POLYCHROME_LEASE_DURATION_MS \(5000\), got 5000/,
    );
  });

  it('leaves the Kubernetes door out unless both its certificate and key are set', () => {
    expect(loadControlPlaneConfig(base).kubeApi).toBeUndefined();
    const files = {
      POLYCHROME_KUBE_API_CERT_FILE: '/kube-api/tls.crt',
      POLYCHROME_KUBE_API_KEY_FILE: '/kube-api/tls.key',
    };
    expect(loadControlPlaneConfig({ ...base, ...files }).kubeApi).toEqual({
      host: '0.0.0.0',
      port: 8444,
      certPath: '/kube-api/tls.crt',
      keyPath: '/kube-api/tls.key',
    });
    expect(() =>
      loadControlPlaneConfig({ ...base, POLYCHROME_KUBE_API_CERT_FILE: '/kube-api/tls.crt' }),
    ).toThrow(
      /POLYCHROME_KUBE_API_KEY_FILE: the Kubernetes door needs both its certificate and its key/,
    );
  });

  it('reads the per-caller limits, 20 conversations, 10 streams, 20 a second in bursts of 60, edges ×50 by default', () => {
    expect(loadControlPlaneConfig(base).limits).toEqual({
      conversations: 20,
      streams: 10,
      requestsPerSecond: 20,
      burst: 60,
      edgeScale: 50,
      authFailureCacheMs: 5_000,
    });
    const set = loadControlPlaneConfig({
      ...base,
      POLYCHROME_LIMIT_CONVERSATIONS: '0',
      POLYCHROME_LIMIT_STREAMS: '3',
      POLYCHROME_LIMIT_REQUESTS_PER_SECOND: '0',
      POLYCHROME_LIMIT_REQUEST_BURST: '0',
      POLYCHROME_LIMIT_EDGE_SCALE: '7',
      POLYCHROME_AUTH_FAILURE_CACHE_MS: '0',
    });
    expect(set.limits).toEqual({
      conversations: 0,
      streams: 3,
      requestsPerSecond: 0,
      burst: 0,
      edgeScale: 7,
      authFailureCacheMs: 0,
    });
  });

  it('refuses a request rate without a burst, and limits that are not whole numbers, by name', () => {
    expect(() => loadControlPlaneConfig({ ...base, POLYCHROME_LIMIT_REQUEST_BURST: '0' })).toThrow(
      /POLYCHROME_LIMIT_REQUEST_BURST: the request rate limit needs both a rate and a burst/,
    );
    expect(() =>
      loadControlPlaneConfig({
        ...base,
        POLYCHROME_LIMIT_STREAMS: '-1',
        POLYCHROME_LIMIT_EDGE_SCALE: '0',
      }),
    ).toThrow(
      /POLYCHROME_LIMIT_STREAMS: must be a whole number from 0[\s\S]*POLYCHROME_LIMIT_EDGE_SCALE: must be a whole number from 1/,
    );
  });

  it('rejects a state address without a port', () => {
    expect(() =>
      loadControlPlaneConfig({ ...base, POLYCHROME_STATE_ADDRESS: 'polychrome-state' }),
    ).toThrow(/POLYCHROME_STATE_ADDRESS: must be host:port/);
  });
});
