import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  devModelName,
  ed25519PublicKeyHex,
  ensureApprovalKey,
  HARNESS_IMAGE_PATTERN,
  HARNESS_MODEL_SECRET_KEYS,
  harnessSourceCommand,
  modelSecretData,
  sandboxHarnessPodSpec,
} from './harness-config';
import { imageMatches } from './local-node-pod';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'polychrome-harness-config-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('ensureApprovalKey', () => {
  it('creates a PKCS#8 ed25519 key once and reports its raw public key', async () => {
    const path = join(dir, 'approval.pem');
    const first = await ensureApprovalKey(path);
    expect(first.privateKeyPath).toBe(path);
    expect(first.publicKeyHex).toMatch(/^[0-9a-f]{64}$/u);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await readFile(path, 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----/u);
    expect(await ensureApprovalKey(path)).toEqual(first);

    // The hex is the key that verifies what the private key signs.
    const message = Buffer.from('approval');
    const signature = sign(null, message, createPrivateKey(await readFile(path)));
    const raw = Buffer.from(first.publicKeyHex, 'hex');
    const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw]);
    const publicKey = createPublicKey({ key: spki, format: 'der', type: 'spki' });
    expect(verify(null, message, publicKey, signature)).toBe(true);
    expect(ed25519PublicKeyHex(publicKey)).toBe(first.publicKeyHex);
  });

  it('refuses a file that is not an ed25519 private key', async () => {
    const path = join(dir, 'not-a-key.pem');
    await writeFile(path, 'hello\n');
    await expect(ensureApprovalKey(path)).rejects.toThrow(/is not an ed25519 private key/u);
  });
});

describe('sandboxHarnessPodSpec', () => {
  it('is config/sandbox’s harness pod spec, reading its variables from the Secret', async () => {
    const spec = await sandboxHarnessPodSpec();
    const harness = spec.containers.find((c) => c.name === 'harness');
    // The local node runs config/sandbox's image, registry placeholder and all, from source.
    expect(harness?.image).toMatch(/^registry\.invalid\/polychrome\/harness:/u);
    expect(imageMatches(HARNESS_IMAGE_PATTERN, String(harness?.image))).toBe(true);
    expect(imageMatches(HARNESS_IMAGE_PATTERN, 'polychrome/harness:dev')).toBe(true);
    expect(imageMatches(HARNESS_IMAGE_PATTERN, 'registry.invalid/polychrome/state:0.1.0')).toBe(
      false,
    );
    const fromSecret = (harness?.env ?? [])
      .filter((e) => e.valueFrom?.secretKeyRef !== undefined)
      .map((e) => e.name);
    expect(fromSecret).toEqual(
      expect.arrayContaining(['HARNESS_APPROVAL_PUBLIC_KEY', 'ANTHROPIC_API_KEY']),
    );
    // Every model setting make dev writes is one the template reads, optional, by that key.
    for (const [key, variable] of Object.entries(HARNESS_MODEL_SECRET_KEYS)) {
      expect(harness?.env?.find((e) => e.name === variable)?.valueFrom).toEqual({
        secretKeyRef: { name: 'polychrome-harness', key, optional: true },
      });
    }
    // A fresh object each time: callers may change it.
    harness?.env?.splice(0);
    const again = await sandboxHarnessPodSpec();
    expect(again.containers.find((c) => c.name === 'harness')?.env?.length).toBeGreaterThan(0);
  });

  it('passes make dev’s model variables through as Secret keys, and says which model that is', () => {
    const env = {
      OPENAI_API_KEY: 'sk-openai',
      OPENAI_BASE_URL: 'http://127.0.0.1:11434/v1',
      ANTHROPIC_BASE_URL: ' ',
      UNRELATED: 'x',
    };
    expect(modelSecretData(env)).toEqual({
      'openai-api-key': 'sk-openai',
      'openai-base-url': 'http://127.0.0.1:11434/v1',
    });
    expect(devModelName(env)).toBe(
      'an OpenAI-compatible model at http://127.0.0.1:11434/v1 (OPENAI_API_KEY is set)',
    );
    expect(devModelName({ ...env, ANTHROPIC_API_KEY: 'sk-ant' })).toContain(
      'set HARNESS_MODEL_PROVIDER to anthropic or openai',
    );
    expect(devModelName({})).toContain('the scripted demo model');
  });

  it('runs the harness from source with this node', () => {
    expect(harnessSourceCommand()).toEqual([
      process.execPath,
      '--import',
      'tsx',
      'harness/main.ts',
    ]);
  });
});
