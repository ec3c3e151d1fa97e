import { mkdir, rename, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * A directory laid out as the kubelet lays out a Secret volume: each file is a link
 * through `..data`, which points at a versioned directory; an update writes a new
 * directory and renames a new `..data` link over the old one, so readers see the old or
 * the new files, and a directory watch sees the rename.
 */
export class SecretVolume {
  private version = 0;

  /** @param dir - an existing, empty directory. */
  constructor(readonly dir: string) {}

  /** The path a process reads `name` at. */
  path(name: string): string {
    return join(this.dir, name);
  }

  /**
   * The paths of a `kubernetes.io/tls` Secret's keys in this volume (`ca.crt`, `tls.crt`,
   * `tls.key`), as a process is pointed at them.
   */
  tlsPaths(): { caPath: string; certPath: string; keyPath: string } {
    return {
      caPath: this.path('ca.crt'),
      certPath: this.path('tls.crt'),
      keyPath: this.path('tls.key'),
    };
  }

  /** Publishes `files` (name to content) as the volume's next version. */
  async update(files: Readonly<Record<string, string>>): Promise<void> {
    this.version += 1;
    const version = `..${String(this.version)}`;
    await mkdir(join(this.dir, version));
    for (const [name, text] of Object.entries(files)) {
      await writeFile(join(this.dir, version, name), text);
    }
    await symlink(version, join(this.dir, '..data_tmp'));
    await rename(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
    if (this.version === 1) {
      for (const name of Object.keys(files)) {
        await symlink(join('..data', name), join(this.dir, name));
      }
    }
  }
}
