import { isAbsolute, relative, resolve, sep } from 'node:path';

/**
 * Where the state plane's two LevelDB databases live, and the rule that keeps them apart:
 * read by its configuration (state/config.ts) and by a restore (state/backup/).
 */

/** The records directory: as given, else a sibling of the journal's named `<dir>-records`. */
export function recordsDirOf(dataDir: string, recordsDir: string | undefined): string {
  return recordsDir ?? `${dataDir.replace(/[/\\]+$/, '')}-records`;
}

/** True when one directory is the other or lies inside it (two LevelDBs would collide). */
export function overlaps(a: string, b: string): boolean {
  const inside = (child: string, parent: string): boolean => {
    const rel = relative(resolve(parent), resolve(child));
    return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
  };
  return inside(a, b) || inside(b, a);
}
