import { chmodSync, lchownSync, lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A pod's `fsGroup` on one of its volumes, as the kubelet's SetVolumeOwnership applies it:
 * every file and directory gets the group, files the group's read bit (and write, on a
 * writable volume), directories read and search and the setgid bit, so what the container
 * creates there keeps the group. Symlinks (the atomic writer's `..data` and top-level
 * names) get the group only. With `onRootMismatch`, a volume whose root already has the
 * group and the bits is left alone, as `fsGroupChangePolicy: OnRootMismatch` does (the
 * files' volumes are always walked: each rewrite makes new files).
 * The local node applies it only in its registry mode, where containers run as their own
 * user (hack/lib/local-node-image.ts); the process mode runs every pod as the node's user.
 */
export function applyFsGroup(
  root: string,
  gid: number,
  readOnly: boolean,
  onRootMismatch: boolean,
): void {
  const fileMask = readOnly ? 0o440 : 0o660;
  const dirMask = fileMask | 0o110 | 0o2000;
  if (onRootMismatch) {
    const top = lstatSync(root);
    if (top.gid === gid && (top.mode & dirMask) === dirMask) return;
  }
  const walk = (path: string): void => {
    const info = lstatSync(path);
    lchownSync(path, info.uid, gid);
    if (info.isSymbolicLink()) return;
    if (info.isDirectory()) {
      chmodSync(path, (info.mode & 0o7777) | dirMask);
      for (const entry of readdirSync(path)) walk(join(path, entry));
    } else {
      chmodSync(path, (info.mode & 0o7777) | fileMask);
    }
  };
  walk(root);
}
