import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { podProcessEnv, type PodRuntime } from './local-node-runtime';

// The preload (hack/lib/local-pod-runtime.mjs) in real Node processes, started with the
// environment the local node gives a container: what a pod's process sees of its address,
// cluster DNS and mounts.

const run = promisify(execFile);
let dir: string;
let dnsFile: string;
let server: Server;
let serverPort: number;

/** Runs `script` as an ES module in a pod process and returns what it printed. */
async function inPod(script: string, runtime: Partial<PodRuntime> = {}): Promise<string> {
  const env = podProcessEnv(
    { PATH: process.env.PATH ?? '', CA_FILE: '/etc/polychrome/tls/ca.crt' },
    { podIP: '127.0.0.1', namespace: 'polychrome-system', mounts: [], dnsFile, ...runtime },
  );
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
    env,
    cwd: dir,
    timeout: 20_000,
  });
  return stdout.trim();
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pod-runtime-'));
  dnsFile = join(dir, 'dns.json');
  await writeFile(
    dnsFile,
    JSON.stringify({
      'polychrome-state.polychrome-system.svc.cluster.local': ['127.0.0.1'],
      'six.polychrome-system.svc.cluster.local': ['::1'],
      'none.polychrome-system.svc.cluster.local': [],
      'door.polychrome-system.svc.cluster.local': { cname: 'localhost' },
      'alias.polychrome-system.svc.cluster.local': {
        cname: 'polychrome-state.polychrome-system.svc.cluster.local',
      },
      'loop-a.polychrome-system.svc.cluster.local': {
        cname: 'loop-b.polychrome-system.svc.cluster.local',
      },
      'loop-b.polychrome-system.svc.cluster.local': {
        cname: 'loop-a.polychrome-system.svc.cluster.local',
      },
      'other.default.svc.cluster.local': ['127.0.0.1'],
    }),
  );
  await mkdir(join(dir, 'volumes', 'tls'), { recursive: true });
  await writeFile(join(dir, 'volumes', 'tls', 'ca.crt'), 'the CA\n');
  await mkdir(join(dir, 'volumes', 'token'), { recursive: true });
  await writeFile(join(dir, 'volumes', 'token', 'token'), 'a token\n');
  server = createServer((_req, res) => res.end('served'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  serverPort = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

describe('the address of the pod', () => {
  // 127.0.0.1 is the only loopback address every machine listens on without setup, so
  // the pod here has it; what matters is that a wildcard listen lands on it.
  it.each([
    ['no host', 'server.listen(0, ready)'],
    ['0.0.0.0', "server.listen(0, '0.0.0.0', ready)"],
    ['::', "server.listen(0, '::', ready)"],
    ['an options object', "server.listen({ port: 0, host: '0.0.0.0' }, ready)"],
    ['a backlog', 'server.listen(0, 511, ready)'],
  ])('a listen on every address with %s binds the pod address', async (_name, call) => {
    const out = await inPod(
      `import net from 'node:net';
       const server = net.createServer();
       const ready = () => { console.log(server.address().address); server.close(); };
       ${call};`,
      { podIP: '127.0.0.1' },
    );
    expect(out).toBe('127.0.0.1');
  });

  it('a listen on a named address is left as it is', async () => {
    const out = await inPod(
      `import net from 'node:net';
       const server = net.createServer();
       server.listen(0, '127.0.0.1', () => { console.log(server.address().address); server.close(); });`,
      { podIP: '192.0.2.1' },
    );
    expect(out).toBe('127.0.0.1');
  });

  it('a pod address that does not exist makes a wildcard listen fail, not bind everywhere', async () => {
    const out = await inPod(
      `import net from 'node:net';
       const server = net.createServer();
       server.on('error', (err) => console.log(err.code));
       server.listen(0, () => console.log('listening on ' + server.address().address));`,
      { podIP: '192.0.2.1' },
    );
    expect(out).toBe('EADDRNOTAVAIL');
  });
});

describe('cluster DNS', () => {
  it('resolves a Service by every name the search list allows, with the callback and the promise API', async () => {
    const out = await inPod(`
      import dns from 'node:dns';
      import { lookup } from 'node:dns/promises';
      const names = ['polychrome-state', 'polychrome-state.polychrome-system',
        'polychrome-state.polychrome-system.svc', 'polychrome-state.polychrome-system.svc.cluster.local.',
        'other.default', 'Polychrome-State.polychrome-system.svc'];
      const found = [];
      for (const name of names) found.push((await lookup(name)).address);
      dns.lookup('polychrome-state', (err, address, family) => {
        console.log(JSON.stringify([...found, address, family, err]));
      });`);
    expect(JSON.parse(out)).toEqual([
      '127.0.0.1',
      '127.0.0.1',
      '127.0.0.1',
      '127.0.0.1',
      '127.0.0.1',
      '127.0.0.1',
      '127.0.0.1',
      4,
      null,
    ]);
  });

  it('answers all: true, a family (number or name), CNAMEs in and out of the cluster, an absolute name, and no ready pod or a CNAME loop as ENOTFOUND', async () => {
    const out = await inPod(`
      import { lookup } from 'node:dns/promises';
      const all = await lookup('polychrome-state', { all: true });
      const six = await lookup('six', { family: 6 });
      const noFour = await lookup('six', { family: 4 }).catch((e) => e.code);
      const none = await lookup('none').catch((e) => e.code);
      const cname = await lookup('door', { family: 4 });
      const named = await lookup('six', { family: 'IPv6' });
      const alias = await lookup('alias');
      const loop = await lookup('loop-a').catch((e) => e.code);
      const absolute = await lookup('polychrome-state.polychrome-system.svc.cluster.local.');
      console.log(JSON.stringify({
        all, six, noFour, none, cname: cname.address, named, alias: alias.address, loop,
        absolute: absolute.address,
      }));`);
    expect(JSON.parse(out)).toEqual({
      all: [{ address: '127.0.0.1', family: 4 }],
      six: { address: '::1', family: 6 },
      noFour: 'ENOTFOUND',
      none: 'ENOTFOUND',
      cname: '127.0.0.1',
      named: { address: '::1', family: 6 },
      alias: '127.0.0.1',
      loop: 'ENOTFOUND',
      absolute: '127.0.0.1',
    });
  });

  it('a Service of another namespace needs its namespace in the name', async () => {
    const out = await inPod(`
      import { lookup } from 'node:dns/promises';
      console.log(await lookup('other').then((a) => a.address, (e) => e.code));`);
    expect(out).not.toBe('127.0.0.1');
  });

  it('connections by Service name reach the pod (fetch and http over net.connect)', async () => {
    const out = await inPod(`
      import http from 'node:http';
      const viaFetch = await (await fetch('http://polychrome-state:${serverPort}/')).text();
      http.get('http://polychrome-state.polychrome-system.svc:${serverPort}/', (res) => {
        let body = ''; res.on('data', (c) => (body += c));
        res.on('end', () => console.log(viaFetch + ' ' + body));
      });`);
    expect(out).toBe('served served');
  });

  it('without a records file, names go to the machine resolver only', async () => {
    const out = await inPod(
      `import { lookup } from 'node:dns/promises';
       console.log(await lookup('polychrome-state').then((a) => a.address, (e) => e.code));`,
      { dnsFile: join(dir, 'missing.json') },
    );
    expect(out).not.toBe('127.0.0.1');
  });
});

describe('mounts', () => {
  it('maps fs calls under a mount path, hard-coded ones included, through both module systems', async () => {
    const out = await inPod(
      `import fs, { readFileSync, existsSync } from 'node:fs';
       import { readFile } from 'node:fs/promises';
       import { createRequire } from 'node:module';
       const cjs = createRequire(import.meta.url)('fs');
       const token = '/var/run/secrets/kubernetes.io/serviceaccount/token';
       console.log(JSON.stringify({
         token: readFileSync(token, 'utf8'),
         exists: existsSync(token),
         viaCjs: cjs.readFileSync(token, 'utf8'),
         ca: await readFile(process.env.CA_FILE, 'utf8'),
         caRaw: await readFile('/etc/polychrome/tls/ca.crt', 'utf8'),
         dir: fs.readdirSync('/etc/polychrome/tls'),
         outside: existsSync('/etc/polychrome/other'),
         env: process.env.CA_FILE.startsWith('/etc/') ? 'unmapped' : 'mapped',
       }));`,
      {
        mounts: [
          {
            mountPath: '/etc/polychrome/tls',
            hostPath: join(dir, 'volumes', 'tls'),
            readOnly: true,
          },
          {
            mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
            hostPath: join(dir, 'volumes', 'token'),
            readOnly: true,
          },
        ],
      },
    );
    expect(JSON.parse(out)).toEqual({
      token: 'a token\n',
      exists: true,
      viaCjs: 'a token\n',
      ca: 'the CA\n',
      caRaw: 'the CA\n',
      dir: ['ca.crt'],
      outside: false,
      env: 'mapped',
    });
  });

  it('a mount over a directory the host also uses (/tmp) shadows pod paths only', async () => {
    // The test's own directory (and its records file) is under the machine's /tmp, as a
    // node's directory or a checkout can be; the pod mounts an emptyDir at /tmp.
    const emptyDir = join(dir, 'volumes', 'tmp');
    await mkdir(emptyDir, { recursive: true });
    const out = await inPod(
      `import { readFileSync, writeFileSync, existsSync } from 'node:fs';
       import { tmpdir } from 'node:os';
       import { lookup } from 'node:dns/promises';
       writeFileSync('/tmp/scratch.txt', 'in the pod');
       console.log(JSON.stringify({
         hostFile: readFileSync(${JSON.stringify(join(dir, 'volumes', 'tls', 'ca.crt'))}, 'utf8'),
         token: readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/token', 'utf8'),
         scratch: readFileSync('/tmp/scratch.txt', 'utf8'),
         dns: (await lookup('polychrome-state')).address,
       }));`,
      {
        hostRoots: [dir],
        mounts: [
          { mountPath: '/tmp', hostPath: emptyDir, readOnly: false },
          {
            mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
            hostPath: join(dir, 'volumes', 'token'),
            readOnly: true,
          },
        ],
      },
    );
    expect(JSON.parse(out)).toEqual({
      hostFile: 'the CA\n',
      token: 'a token\n',
      scratch: 'in the pod',
      dns: '127.0.0.1',
    });
    // The pod's /tmp/scratch.txt is in the emptyDir, not in the machine's /tmp.
    expect(existsSync(join(emptyDir, 'scratch.txt'))).toBe(true);
  });

  it('refuses writes under a readOnly mount with EROFS, however they are made', async () => {
    const emptyDir = join(dir, 'volumes', 'tmp');
    await mkdir(emptyDir, { recursive: true });
    const tokenHost = join(dir, 'volumes', 'token');
    const out = await inPod(
      `import fs from 'node:fs';
       import { join } from 'node:path';
       const token = '/var/run/secrets/kubernetes.io/serviceaccount/token';
       const code = (run) => { try { run(); return 'ok'; } catch (e) { return e.code; } };
       const made = fs.mkdtempSync('/tmp/work-');
       fs.writeFileSync(join(made, 'f'), 'x');
       console.log(JSON.stringify({
         read: fs.readFileSync(token, 'utf8'),
         writeSync: code(() => fs.writeFileSync(token, 'forged')),
         hostPath: code(() => fs.writeFileSync(${JSON.stringify(join(tokenHost, 'new'))}, 'x')),
         unlink: code(() => fs.unlinkSync(token)),
         openForWrite: code(() => fs.openSync(token, 'r+')),
         openForRead: code(() => fs.closeSync(fs.openSync(token, 'r'))),
         renameInto: code(() => fs.renameSync(join(made, 'f'), token)),
         copyOut: code(() => fs.copyFileSync(token, join(made, 'copy'))),
         promises: await fs.promises.writeFile(token, 'forged').then(() => 'ok', (e) => e.code),
         callback: await new Promise((resolve) => fs.writeFile(token, 'x', (e) => resolve(e?.code ?? 'ok'))),
         message: (() => { try { fs.appendFileSync(token, 'x'); return 'ok'; } catch (e) { return e.message; } })(),
         writable: code(() => fs.writeFileSync('/tmp/ok.txt', 'fine')),
         made: made.startsWith(${JSON.stringify(emptyDir)}),
         inMade: fs.readFileSync(join(made, 'copy'), 'utf8'),
       }));`,
      {
        hostRoots: [dir],
        mounts: [
          { mountPath: '/tmp', hostPath: emptyDir, readOnly: false },
          {
            mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
            hostPath: tokenHost,
            readOnly: true,
          },
        ],
      },
    );
    expect(JSON.parse(out)).toEqual({
      read: 'a token\n',
      writeSync: 'EROFS',
      hostPath: 'EROFS',
      unlink: 'EROFS',
      openForWrite: 'EROFS',
      openForRead: 'ok',
      renameInto: 'EROFS',
      copyOut: 'ok',
      promises: 'EROFS',
      callback: 'EROFS',
      message: `EROFS: read-only file system, appendFile '${join(tokenHost, 'token')}'`,
      writable: 'ok',
      made: true,
      inMade: 'a token\n',
    });
    expect(readFileSync(join(tokenHost, 'token'), 'utf8')).toBe('a token\n');
    expect(existsSync(join(emptyDir, 'ok.txt'))).toBe(true);
  });

  it('without mounts, paths are the machine’s own', async () => {
    const out = await inPod(
      `import { existsSync } from 'node:fs';
       console.log(String(existsSync('/etc/polychrome/tls/ca.crt')));`,
    );
    expect(out).toBe('false');
  });
});
