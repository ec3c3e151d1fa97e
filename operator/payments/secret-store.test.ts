import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiException } from '@kubernetes/client-node';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import {
  directorySecretStore,
  kubernetesSecretReader,
  kubernetesSecretStore,
  type SecretReader,
} from './secret-store';

const KEY = generatePrivateKey();
const ADDRESS = privateKeyToAccount(KEY).address;

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'wallets-'));
  await writeFile(join(dir, 'ops.private-key'), `${KEY}\n`, { mode: 0o600 });
  await writeFile(join(dir, 'loose.private-key'), KEY, { mode: 0o644 });
  await chmod(join(dir, 'loose.private-key'), 0o644);
  await writeFile(join(dir, 'junk.private-key'), 'not a key', { mode: 0o600 });
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('directorySecretStore', () => {
  const store = () => directorySecretStore(dir);

  it('hands out a wallet that signs as the key, and no key', async () => {
    const wallet = await store().wallet('ops');
    expect(wallet.address).toBe(ADDRESS);
    expect(Object.keys(wallet).sort()).toEqual(['address', 'name', 'signTypedData']);
    expect(JSON.stringify(wallet)).not.toContain(KEY.slice(2));
  });

  it.each([
    [
      'a missing wallet',
      'nobody',
      /wallet nobody has no key: file .*nobody.private-key does not exist/,
    ],
    [
      'a file others may read',
      'loose',
      /wallet loose: .* may be read by its group or others \(mode 644\); chmod 600 it/,
    ],
    ['a file that is not a key', 'junk', /wallet junk: the stored key is not 32 bytes of hex/],
    ['a name that climbs out of the directory', '../etc/passwd', /is not a lower-case DNS label/],
    ['an upper-case name', 'Ops', /is not a lower-case DNS label/],
  ])('refuses %s', async (_case, name, message) => {
    await expect(store().wallet(name)).rejects.toThrow(message);
  });
});

describe('kubernetesSecretStore', () => {
  const secrets: Record<string, Record<string, string>> = {
    'polychrome-wallet-ops': { 'private-key': Buffer.from(KEY).toString('base64') },
    'polychrome-wallet-empty': {},
  };
  const reader: SecretReader = {
    read: (namespace, name) =>
      Promise.resolve(namespace === 'polychrome-system' ? secrets[name] : undefined),
  };
  const store = kubernetesSecretStore(reader, 'polychrome-system');

  it('reads the key from the wallet Secret in its own namespace', async () => {
    expect((await store.wallet('ops')).address).toBe(ADDRESS);
  });

  it('names the Secret and the missing part, not the key', async () => {
    await expect(store.wallet('gone')).rejects.toThrow(
      'wallet gone has no key: Secret polychrome-system/polychrome-wallet-gone does not exist',
    );
    await expect(store.wallet('empty')).rejects.toThrow(
      'Secret polychrome-system/polychrome-wallet-empty has no private-key key',
    );
    await expect(kubernetesSecretStore(reader, 'tenant').wallet('ops')).rejects.toThrow(
      /does not exist/,
    );
  });
});

describe('kubernetesSecretReader', () => {
  it('maps the API 404 to "does not exist" and other failures to an error without the body', async () => {
    const failing = (code: number) =>
      kubernetesSecretReader({
        readNamespacedSecret: () =>
          Promise.reject(new ApiException(code, 'failed', { message: `secret body ${KEY}` }, {})),
      });
    await expect(failing(404).read('ns', 'x')).resolves.toBeUndefined();
    const error = await failing(403)
      .read('ns', 'x')
      .catch((e: unknown) => e as Error);
    expect((error as Error).message).toBe('could not read Secret ns/x (status 403)');
  });
});
