// Loaded with `--import` (through NODE_OPTIONS) into every process hack's local node runs
// for a pod (hack/lib/local-node-runtime.ts builds the variables). A pod there is a process
// on the machine's own network and file system, with no namespaces of its own, so this
// module gives it the three parts of a pod's view it would otherwise miss. It reads one
// variable, POLYCHROME_LOCAL_POD (JSON: podIP, namespace, dnsFile, mounts), and does
// nothing when it is absent:
//
// - Its own address. A server that listens on every address (no host, 0.0.0.0 or ::), as
//   a process in a pod does, binds the pod's loopback address instead, so two pods can
//   both listen on 9090.
// - Cluster DNS. A Service name (`svc`, `svc.ns`, `svc.ns.svc`, `svc.ns.svc.cluster.local`,
//   searched from the pod's namespace as resolv.conf's `search` and `ndots:5` do) resolves
//   from the records file the node keeps (hack/lib/local-node-dns.ts); anything else goes
//   to the machine's resolver.
// - Its mounts. A JavaScript file call on a path under a volumeMount's mountPath (e.g. the
//   client library's hard-coded /var/run/secrets/kubernetes.io/serviceaccount/token) goes
//   to the volume's directory on this machine, and a write under a readOnly mount (every
//   Secret, ConfigMap, downward API and projected volume) fails with EROFS, as a read-only
//   bind mount does. Native code does not pass through here: the node rewrites the
//   environment's paths for it too.
//
// Plain JavaScript, because it runs before anything else in the process, with or without
// tsx (the harness image runs its built output).
import dns from 'node:dns';
import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import net from 'node:net';
import { promisify } from 'node:util';

// The originals, before any patch below: the records file is a path of this machine.
const readFileSync = fs.readFileSync;

const raw = process.env.POLYCHROME_LOCAL_POD;
const pod = raw === undefined || raw === '' ? undefined : JSON.parse(raw);

if (pod !== undefined) {
  if (typeof pod.podIP === 'string' && pod.podIP !== '') bindPodAddress(pod.podIP);
  if (typeof pod.dnsFile === 'string' && pod.dnsFile !== '') {
    resolveClusterNames(pod.dnsFile, String(pod.namespace ?? 'default'));
  }
  if (Array.isArray(pod.mounts) && pod.mounts.length > 0) {
    mapMountedPaths(pod.mounts, Array.isArray(pod.hostRoots) ? pod.hostRoots : []);
  }
  syncBuiltinESMExports();
}

/** listen() on every address binds `podIP`; a named host, a path or a handle is left alone. */
function bindPodAddress(podIP) {
  const everywhere = (host) =>
    host === undefined || host === null || host === '' || host === '0.0.0.0' || host === '::';
  const listen = net.Server.prototype.listen;
  net.Server.prototype.listen = function (...args) {
    const [first] = args;
    if (args.length === 0 || typeof first === 'function') {
      args.unshift(0, podIP);
    } else if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
      if (typeof args[1] === 'string') {
        if (everywhere(args[1])) args[1] = podIP;
      } else {
        args.splice(1, 0, podIP);
      }
    } else if (
      typeof first === 'object' &&
      first !== null &&
      first.path === undefined &&
      first.fd === undefined &&
      first.handle === undefined &&
      first._handle === undefined &&
      everywhere(first.host)
    ) {
      args[0] = { ...first, host: podIP };
    }
    return listen.apply(this, args);
  };
}

/** The names a lookup of `hostname` tries, in order, as resolv.conf's search list does. */
function candidates(hostname, namespace) {
  const name = hostname.toLowerCase().replace(/\.$/, '');
  // A name ending in a dot is absolute: no search list.
  if (name.endsWith('.cluster.local') || hostname.endsWith('.')) return [name];
  const searched = [`${namespace}.svc.cluster.local`, 'svc.cluster.local', 'cluster.local'].map(
    (domain) => `${name}.${domain}`,
  );
  // ndots:5: a name with fewer dots tries the search list first.
  return name.split('.').length - 1 >= 5 ? [name, ...searched] : [...searched, name];
}

/** dns.lookup and dns.promises.lookup answer cluster names from the node's records file. */
function resolveClusterNames(dnsFile, namespace) {
  const lookup = dns.lookup;
  const records = () => {
    try {
      return JSON.parse(readFileSync(dnsFile, 'utf8'));
    } catch {
      return {};
    }
  };
  const recordOf = (all, hostname) => {
    for (const name of candidates(hostname, namespace)) {
      if (all[name] !== undefined) return all[name];
    }
    return undefined;
  };
  // Addresses of a cluster name, a CNAME target outside the cluster to resolve, or
  // undefined: not ours. CNAMEs between cluster names are followed here, a few at most
  // (a loop of ExternalNames answers nothing, as a resolver gives up).
  const find = (hostname) => {
    if (typeof hostname !== 'string' || net.isIP(hostname) !== 0) return undefined;
    const all = records();
    let record = recordOf(all, hostname);
    for (let hops = 0; record !== undefined && !Array.isArray(record); hops++) {
      const next = recordOf(all, String(record.cname));
      if (next === undefined) return record;
      if (hops >= 8) return [];
      record = next;
    }
    return record;
  };
  const answer = (hostname, addresses, options) => {
    const asked = typeof options === 'number' ? options : options?.family;
    const family = asked === 'IPv4' ? 4 : asked === 'IPv6' ? 6 : Number(asked ?? 0);
    const wanted = addresses
      .map((address) => ({ address, family: net.isIP(address) }))
      .filter((entry) => entry.family !== 0 && (family === 0 || entry.family === family));
    if (wanted.length === 0) {
      const error = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
      error.code = 'ENOTFOUND';
      error.hostname = hostname;
      return { error };
    }
    return { wanted };
  };
  dns.lookup = function (hostname, options, callback) {
    const done = typeof options === 'function' ? options : callback;
    const opts = typeof options === 'function' ? undefined : options;
    const record = find(hostname);
    if (record === undefined) return lookup.apply(this, arguments);
    if (!Array.isArray(record)) return dns.lookup(record.cname, opts ?? {}, done);
    const { error, wanted } = answer(hostname, record, opts);
    process.nextTick(() => {
      if (error !== undefined) done(error);
      else if (typeof opts === 'object' && opts?.all === true) done(null, wanted);
      else done(null, wanted[0].address, wanted[0].family);
    });
    return {};
  };
  const promised = dns.promises.lookup;
  dns.promises.lookup = async function (hostname, options) {
    const record = find(hostname);
    if (record === undefined) return promised.call(this, hostname, options);
    if (!Array.isArray(record)) return dns.promises.lookup(record.cname, options);
    const { error, wanted } = answer(hostname, record, options);
    if (error !== undefined) throw error;
    return typeof options === 'object' && options?.all === true ? wanted : wanted[0];
  };
  // util.promisify(dns.lookup) resolves to { address, family }, as with the original.
  dns.lookup[promisify.custom] = (hostname, options) => dns.promises.lookup(hostname, options);
}

/**
 * fs calls on a path under a mount go to the mount's directory on this machine. Host and
 * pod paths share one file system here, so some paths are this machine's whatever the
 * mounts say: those under `hostRoots` (the process's working directory, with its sources
 * and node_modules, and the node's own directory) and those already inside a mount's
 * directory (the environment's paths, rewritten by the node). A call made from inside
 * another (readFileSync opens through openSync) is not mapped again.
 */
function mapMountedPaths(mounts, hostRoots) {
  // Longest mount path first, so a mount inside another wins.
  const table = mounts
    .filter((m) => typeof m.mountPath === 'string' && typeof m.hostPath === 'string')
    .map((m) => ({
      from: m.mountPath.replace(/\/+$/, ''),
      to: m.hostPath,
      ro: m.readOnly === true,
    }))
    .sort((a, b) => b.from.length - a.from.length);
  const under = (path, root) => path === root || path.startsWith(`${root.replace(/\/+$/, '')}/`);
  const hostOwned = [...hostRoots, ...table.map((m) => m.to)].filter((p) => typeof p === 'string');
  // The host directories of the read-only mounts, deepest first (a writable mount may sit
  // inside a read-only one, or the other way round).
  const hostTable = [...table].sort((a, b) => b.to.length - a.to.length);
  const readOnlyAt = (path) => hostTable.find((m) => under(path, m.to))?.ro === true;
  let depth = 0;
  const map = (path) => {
    if (depth > 0 || typeof path !== 'string' || !path.startsWith('/')) return path;
    if (hostOwned.some((root) => under(path, root))) return path;
    for (const { from, to } of table) {
      if (path === from) return to;
      if (path.startsWith(`${from}/`)) return to + path.slice(from.length);
    }
    return path;
  };
  const refused = (syscall, path) =>
    Object.assign(new Error(`EROFS: read-only file system, ${syscall} '${path}'`), {
      errno: -30,
      code: 'EROFS',
      syscall,
      path,
    });
  const onePath = [
    'access',
    'appendFile',
    'chmod',
    'chown',
    'createReadStream',
    'createWriteStream',
    'exists',
    'existsSync',
    'lchown',
    'lstat',
    'lutimes',
    'mkdir',
    'mkdtemp',
    'open',
    'opendir',
    'readdir',
    'readFile',
    'readlink',
    'realpath',
    'rm',
    'rmdir',
    'stat',
    'statfs',
    'truncate',
    'unlink',
    'utimes',
    'watch',
    'watchFile',
    'unwatchFile',
    'writeFile',
  ];
  const twoPaths = ['copyFile', 'cp', 'link', 'rename', 'symlink'];
  // Which arguments a call writes: the path of these; only the target of copyFile, cp,
  // link and symlink; both of rename; open's path unless its flags only read.
  const writes = new Set([
    'appendFile',
    'chmod',
    'chown',
    'createWriteStream',
    'lchown',
    'lutimes',
    'mkdir',
    'mkdtemp',
    'rm',
    'rmdir',
    'truncate',
    'unlink',
    'utimes',
    'writeFile',
  ]);
  const { O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND } = fs.constants;
  const writing = (flags) =>
    typeof flags === 'number'
      ? (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND)) !== 0
      : typeof flags === 'string' && /[wa+]/.test(flags);
  const writtenArgs = (name, args) => {
    const base = name.replace(/Sync$/, '');
    if (writes.has(base)) return [0];
    if (base === 'rename') return [0, 1];
    if (base === 'copyFile' || base === 'cp' || base === 'link' || base === 'symlink') return [1];
    if (base === 'open') return writing(args[1]) ? [0] : [];
    return [];
  };
  const wrap = (target, name, paths) => {
    const original = target[name];
    if (typeof original !== 'function') return;
    const wrapped = function (...args) {
      for (let i = 0; i < paths; i++) args[i] = map(args[i]);
      if (depth === 0) {
        const at = writtenArgs(name, args).find(
          (i) => typeof args[i] === 'string' && readOnlyAt(args[i]),
        );
        if (at !== undefined) {
          const error = refused(name.replace(/Sync$/, ''), args[at]);
          // As the call reports any failure: thrown, rejected, or to its callback.
          if (target === fs.promises) return Promise.reject(error);
          const callback = args.at(-1);
          if (!name.endsWith('Sync') && typeof callback === 'function') {
            process.nextTick(callback, error);
            return undefined;
          }
          throw error;
        }
      }
      depth++;
      try {
        return original.apply(this, args);
      } finally {
        depth--;
      }
    };
    // fs.realpath.native and the promisify hooks are properties of the functions.
    if (typeof original.native === 'function') {
      const native = original.native;
      wrapped.native = (path, ...rest) => native(map(path), ...rest);
    }
    if (original[promisify.custom] !== undefined)
      wrapped[promisify.custom] = original[promisify.custom];
    target[name] = wrapped;
  };
  for (const name of onePath) {
    wrap(fs, name, 1);
    wrap(fs, `${name}Sync`, 1);
    wrap(fs.promises, name, 1);
  }
  for (const name of twoPaths) {
    wrap(fs, name, 2);
    wrap(fs, `${name}Sync`, 2);
    wrap(fs.promises, name, 2);
  }
}
