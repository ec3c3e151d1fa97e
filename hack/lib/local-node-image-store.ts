import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ImageConfig, PinnedImage } from './local-node-image';

const run = promisify(execFile);

/** An image unpacked on this machine: its root and its config. */
export interface PulledImage {
  /** The unpacked root filesystem (read-only to containers: an overlay's lower layer). */
  root: string;
  config: ImageConfig;
  /** The image's /etc/passwd and /etc/group, for names in its `User`. */
  passwd: string;
  group: string;
}

/** What the local node pulls images with. */
export interface ImagePuller {
  /** Pulls (or finds in the cache) `image`; rejects with crane's reason when it cannot. */
  pull(image: PinnedImage): Promise<PulledImage>;
}

/** Options for {@link CraneImageStore}. */
export interface CraneImageStoreOptions {
  /** hack/bin/crane. */
  crane: string;
  /** Unpacked images, one directory per digest and platform. */
  cacheDir: string;
  /** `linux/<arch>` of an index. @default this machine's */
  platform?: string;
}

/** This machine's platform as images name it. */
export function hostPlatform(): string {
  return `linux/${process.arch === 'x64' ? 'amd64' : process.arch}`;
}

const readOr = (path: string, fallback: string): string => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return fallback;
  }
};

/**
 * Images pulled with crane from the registry the reference names and unpacked under
 * `cacheDir`, cached by digest and platform: `crane config` and `crane export` fetch by
 * digest, and crane checks every manifest and blob it reads against its digest, so what is
 * unpacked is what the reference pins. A pull unpacks into a temporary directory renamed
 * into place once complete; concurrent pulls of one image share one.
 */
export class CraneImageStore implements ImagePuller {
  private readonly inflight = new Map<string, Promise<PulledImage>>();

  constructor(private readonly opts: CraneImageStoreOptions) {}

  private get platform(): string {
    return this.opts.platform ?? hostPlatform();
  }

  pull(image: PinnedImage): Promise<PulledImage> {
    const dir = join(
      this.opts.cacheDir,
      `${image.digest.replace(':', '-')}-${this.platform.replace('/', '-')}`,
    );
    let pulling = this.inflight.get(dir);
    if (pulling === undefined) {
      pulling = this.pullInto(image, dir).finally(() => this.inflight.delete(dir));
      this.inflight.set(dir, pulling);
    }
    return pulling;
  }

  private loaded(dir: string): PulledImage {
    const root = join(dir, 'rootfs');
    const { config } = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as {
      config?: ImageConfig;
    };
    return {
      root,
      config: config ?? {},
      passwd: readOr(join(root, 'etc', 'passwd'), ''),
      group: readOr(join(root, 'etc', 'group'), ''),
    };
  }

  private async pullInto(image: PinnedImage, dir: string): Promise<PulledImage> {
    if (existsSync(join(dir, 'config.json'))) return this.loaded(dir);
    const partial = `${dir}.partial-${process.pid}`;
    rmSync(partial, { recursive: true, force: true });
    mkdirSync(join(partial, 'rootfs'), { recursive: true, mode: 0o755 });
    try {
      const platform = ['--platform', this.platform];
      const config = await run(this.opts.crane, ['config', ...platform, image.ref], {
        maxBuffer: 16 << 20,
      }).catch((err: { stderr?: string; message: string }) => {
        throw new Error(`crane config: ${(err.stderr ?? err.message).trim()}`);
      });
      await this.exportInto(image, platform, join(partial, 'rootfs'));
      writeFileSync(join(partial, 'config.json'), config.stdout);
      rmSync(dir, { recursive: true, force: true });
      renameSync(partial, dir);
    } finally {
      rmSync(partial, { recursive: true, force: true });
    }
    return this.loaded(dir);
  }

  /** `crane export REF - | tar -x`: the flattened filesystem, owners and modes kept. */
  private exportInto(image: PinnedImage, platform: string[], root: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const crane = spawn(this.opts.crane, ['export', ...platform, image.ref, '-'], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const tar = spawn('tar', ['-x', '--same-owner', '--same-permissions', '-C', root], {
        stdio: ['pipe', 'ignore', 'pipe'],
      });
      crane.stdout.pipe(tar.stdin);
      let errors = '';
      crane.stderr.on('data', (d: Buffer) => (errors += d.toString()));
      tar.stderr.on('data', (d: Buffer) => (errors += d.toString()));
      let pending = 2;
      let failed = '';
      const done = (what: string, code: number | null): void => {
        if (code !== 0) failed ||= `${what} exited ${String(code)}`;
        if (--pending > 0) return;
        if (failed === '') resolve();
        else reject(new Error(`crane export: ${errors.trim() || failed}`));
      };
      crane.once('error', (err) => reject(err));
      tar.once('error', (err) => reject(err));
      crane.once('close', (code) => done('crane', code));
      tar.once('close', (code) => done('tar', code));
    });
  }
}
