import { describe, expect, it } from '@jest/globals';
import type { V1Pod, V1Service } from '@kubernetes/client-node';
import { clusterDnsRecords } from './local-node-dns';

function pod(
  name: string,
  ip: string | undefined,
  opts: {
    ready?: boolean;
    labels?: Record<string, string>;
    namespace?: string;
    deleting?: boolean;
    hostname?: string;
    subdomain?: string;
  } = {},
): V1Pod {
  return {
    metadata: {
      name,
      namespace: opts.namespace ?? 'polychrome-system',
      labels: opts.labels ?? { app: 'state' },
      ...(opts.deleting === true ? { deletionTimestamp: new Date() } : {}),
    },
    spec: {
      containers: [
        {
          name: 'main',
          ports: [
            { name: 'grpc', containerPort: 7443 },
            { name: 'metrics', containerPort: 9090 },
          ],
        },
      ],
      ...(opts.hostname !== undefined ? { hostname: opts.hostname } : {}),
      ...(opts.subdomain !== undefined ? { subdomain: opts.subdomain } : {}),
    },
    status: {
      ...(ip !== undefined ? { podIP: ip } : {}),
      conditions: [{ type: 'Ready', status: opts.ready === false ? 'False' : 'True' }],
    },
  };
}

function service(
  name: string,
  spec: V1Service['spec'],
  namespace = 'polychrome-system',
): V1Service {
  return { metadata: { name, namespace }, spec };
}

const state = service('polychrome-state', {
  selector: { app: 'state' },
  ports: [{ name: 'grpc', port: 7443, targetPort: 'grpc' }],
});

describe('clusterDnsRecords', () => {
  it('a Service name has the addresses of its ready, selected pods of its namespace', () => {
    const { records, problems } = clusterDnsRecords(
      [state],
      [
        pod('a', '127.4.1.2'),
        pod('b', '127.4.1.1'),
        pod('not-ready', '127.4.1.3', { ready: false }),
        pod('no-ip', undefined),
        pod('deleting', '127.4.1.4', { deleting: true }),
        pod('other-app', '127.4.1.5', { labels: { app: 'other' } }),
        pod('other-namespace', '127.4.1.6', { namespace: 'default' }),
      ],
    );
    expect(records).toEqual({
      'polychrome-state.polychrome-system.svc.cluster.local': ['127.4.1.1', '127.4.1.2'],
    });
    expect(problems).toEqual([]);
  });

  it('publishNotReadyAddresses includes pods that are not ready, and StatefulSet pods get their own names', () => {
    const headless = service('state-headless', {
      clusterIP: 'None',
      publishNotReadyAddresses: true,
      selector: { app: 'state' },
      ports: [{ port: 7443, targetPort: 'grpc' }],
    });
    const { records } = clusterDnsRecords(
      [headless],
      [
        pod('state-0', '127.4.1.7', {
          ready: false,
          hostname: 'state-0',
          subdomain: 'state-headless',
        }),
      ],
    );
    expect(records).toEqual({
      'state-headless.polychrome-system.svc.cluster.local': ['127.4.1.7'],
      'state-0.state-headless.polychrome-system.svc.cluster.local': ['127.4.1.7'],
    });
  });

  it('an ExternalName is a CNAME; a Service without a selector has no record', () => {
    const { records } = clusterDnsRecords(
      [
        service('door', {
          type: 'ExternalName',
          externalName: 'localhost',
          ports: [{ port: 8444 }],
        }),
        service('manual', { ports: [{ port: 80 }] }),
      ],
      [pod('a', '127.4.1.2')],
    );
    expect(records).toEqual({ 'door.polychrome-system.svc.cluster.local': { cname: 'localhost' } });
  });

  it('a Service with no ready pod has an empty record (the name exists, nothing answers)', () => {
    const { records } = clusterDnsRecords([state], [pod('a', '127.4.1.2', { ready: false })]);
    expect(records['polychrome-state.polychrome-system.svc.cluster.local']).toEqual([]);
  });

  it('reports a Service whose port is not the port its pods listen on', () => {
    const metrics = service('metrics', {
      selector: { app: 'state' },
      ports: [
        { name: 'fine', port: 9090, targetPort: 'metrics' },
        { name: 'by-number', port: 80, targetPort: 9090 },
        { name: 'by-name', port: 443, targetPort: 'grpc' },
      ],
    });
    const { problems } = clusterDnsRecords([metrics], [pod('a', '127.4.1.2')]);
    expect(problems).toHaveLength(2);
    expect(problems[0]).toContain(
      'Service polychrome-system/metrics port 80 targets another port (9090)',
    );
    expect(problems[1]).toContain('port 443 targets another port (grpc)');
  });
});
