import { afterEach, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { freePort, pollUntil } from './processes';
import { HostPorts, hostPortRules, parsePortForward } from './local-node-host-ports';

describe('hostPortRules', () => {
  it('takes TCP ports with a hostPort, on loopback unless the pod names an address', () => {
    expect(
      hostPortRules([
        { containerPort: 8080, hostPort: 18080 },
        { containerPort: 8444, hostPort: 18444, hostIP: '127.0.0.2' },
        { containerPort: 9090 },
        { containerPort: 53, hostPort: 1053, protocol: 'UDP' },
      ]),
    ).toEqual([
      { hostIP: '127.0.0.1', hostPort: 18080, containerPort: 8080 },
      { hostIP: '127.0.0.2', hostPort: 18444, containerPort: 8444 },
    ]);
  });
});

describe('HostPorts', () => {
  let upstream: Server | undefined;
  let ports: HostPorts | undefined;
  afterEach(async () => {
    await ports?.close();
    await new Promise((resolve) => (upstream ? upstream.close(resolve) : resolve(undefined)));
  });

  it('forwards the host port to the pod address and the container port, until closed', async () => {
    upstream = createServer((req, res) => res.end(`pod answered ${req.url ?? ''}`));
    await new Promise<void>((resolve) => upstream?.listen(0, '127.0.0.1', resolve));
    const containerPort = (upstream.address() as AddressInfo).port;
    const hostPort = await freePort();
    const lines: string[] = [];
    ports = new HostPorts([{ containerPort, hostPort }], '127.0.0.1', (l) => lines.push(l));
    ports.open();
    const answer = await fetch(`http://127.0.0.1:${hostPort}/hello`).then((r) => r.text());
    expect(answer).toBe('pod answered /hello');
    await ports.close();
    await expect(fetch(`http://127.0.0.1:${hostPort}/`)).rejects.toThrow();
    expect(lines).toEqual([]);
  });

  it('a host port another program holds is reported, not fatal', async () => {
    upstream = createServer((_req, res) => res.end('someone else'));
    await new Promise<void>((resolve) => upstream?.listen(0, '127.0.0.1', resolve));
    const taken = (upstream.address() as AddressInfo).port;
    const lines: string[] = [];
    ports = new HostPorts([{ containerPort: 1, hostPort: taken }], '127.0.0.1', (l) =>
      lines.push(l),
    );
    ports.open();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(lines.join('\n')).toMatch(
      new RegExp(`hostPort 127.0.0.1:${taken} is not served: .*EADDRINUSE`),
    );
    expect(await fetch(`http://127.0.0.1:${taken}/`).then((r) => r.text())).toBe('someone else');

    // Once the port is free, the next open (a container's next start) takes it.
    await new Promise((resolve) => upstream?.close(resolve));
    upstream = undefined;
    ports.open();
    const accepts = (): Promise<boolean> =>
      new Promise((resolve) => {
        const socket = connect({ host: '127.0.0.1', port: taken });
        socket.once('connect', () => resolve(true));
        socket.once('error', () => resolve(false));
        socket.once('close', () => socket.destroy());
      });
    await pollUntil('the freed host port to be served', async () =>
      (await accepts()) ? true : undefined,
    );
  });
});

describe('parsePortForward', () => {
  it('reads [HOST:]PORT=NAMESPACE/SERVICE:TARGET', () => {
    expect(parsePortForward('8080=polychrome-system/polychrome-control-plane:api')).toEqual({
      listen: { host: '127.0.0.1', port: 8080 },
      namespace: 'polychrome-system',
      service: 'polychrome-control-plane',
      targetPort: 'api',
    });
    expect(parsePortForward('127.0.0.2:7443=ns/state:7443')).toEqual({
      listen: { host: '127.0.0.2', port: 7443 },
      namespace: 'ns',
      service: 'state',
      targetPort: 7443,
    });
  });

  it.each(['8080', '8080=service:api', 'x=ns/svc:api', '8080=ns/svc'])(
    'refuses %s, naming the form',
    (spec) => {
      expect(() => parsePortForward(spec)).toThrow('expected [HOST:]PORT=NAMESPACE/SERVICE:TARGET');
    },
  );
});
