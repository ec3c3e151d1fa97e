/**
 * A root filesystem laid out as the images are, for the tests of the image checks
 * (hack/check-image.test.ts, hack/check-image-serving.test.ts): this machine's node at
 * /nodejs/bin/node and the shared libraries it loads, where the dynamic loader looks for
 * them, every file root-owned. The tests run it under a real `chroot`.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * Lays out `rootfs` (created) with `node` as /nodejs/bin/node and the libraries `ldd` lists
 * for it and for each of `alsoLinked` (a native module the image loads), loader included.
 */
export function makeImageRoot(
  rootfs: string,
  node: string = process.execPath,
  alsoLinked: readonly string[] = [],
): void {
  mkdirSync(join(rootfs, 'nodejs', 'bin'), { recursive: true, mode: 0o755 });
  copyFileSync(node, join(rootfs, 'nodejs', 'bin', 'node'));
  chmodSync(join(rootfs, 'nodejs', 'bin', 'node'), 0o755);
  // ldd: "name => path (0x…)" and the loader's own "path (0x…)".
  const ldd = execFileSync('ldd', [node, ...alsoLinked], { encoding: 'utf8' });
  for (const m of ldd.matchAll(/(?:=> )?(\/\S+) \(0x/gu)) {
    const lib = m[1] as string;
    mkdirSync(join(rootfs, dirname(lib)), { recursive: true, mode: 0o755 });
    copyFileSync(lib, join(rootfs, lib));
  }
}
