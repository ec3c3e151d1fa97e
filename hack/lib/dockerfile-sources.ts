/**
 * What a Dockerfile copies from its build context: every source of every `COPY` and `ADD`
 * that is not `--from=` a stage or an image, as a path relative to the context root. Pure;
 * hack/docker-context.test.ts checks each against the .dockerignore (docs/images.md).
 *
 * It reads the Dockerfile as BuildKit does for these instructions: a trailing `\` joins
 * lines, comment lines inside an instruction are dropped, flags come before the sources,
 * the last argument is the destination, and the JSON form is an array of the same. What it
 * cannot resolve without building (variables, wildcards, heredocs, another escape
 * character) it refuses, naming the line, rather than checking something else.
 */
import { posix } from 'node:path';

/** One instruction's sources from the context. */
export interface ContextCopy {
  /** The instruction's first line, 1-based. */
  readonly line: number;
  readonly instruction: 'COPY' | 'ADD';
  /** Relative to the context root, normalized; `.` is the whole context. */
  readonly sources: readonly string[];
}

interface Instruction {
  readonly line: number;
  readonly text: string;
}

/** Joins continued lines and drops comments and blank lines, as the Dockerfile parser does. */
function instructions(dockerfile: string, name: string): Instruction[] {
  const out: Instruction[] = [];
  let current: { line: number; parts: string[] } | undefined;
  const lines = dockerfile.split(/\r?\n/u);
  for (const [index, raw] of lines.entries()) {
    if (index === 0 && /^#\s*escape\s*=\s*[^\\\s]/iu.test(raw)) {
      throw new Error(
        `${name}:1: an escape directive other than \\ is not supported by this check`,
      );
    }
    const trimmed = raw.trim();
    // Blank lines inside an instruction are dropped too (Docker warns of them).
    if (trimmed.startsWith('#') || trimmed === '') continue;
    const continued = /\\\s*$/u.test(raw);
    const body = continued ? raw.replace(/\\\s*$/u, '') : raw;
    current ??= { line: index + 1, parts: [] };
    current.parts.push(body);
    if (!continued) {
      out.push({ line: current.line, text: current.parts.join(' ').trim() });
      current = undefined;
    }
  }
  if (current !== undefined) {
    out.push({ line: current.line, text: current.parts.join(' ').trim() });
  }
  return out;
}

/** The arguments after the flags, JSON form or whitespace-separated. */
function splitArguments(rest: string, where: string): { flags: string[]; args: string[] } {
  const flags: string[] = [];
  let remaining = rest.trim();
  for (let m = /^(--\S+)\s*/u.exec(remaining); m !== null; m = /^(--\S+)\s*/u.exec(remaining)) {
    flags.push(m[1] as string);
    remaining = remaining.slice(m[0].length);
  }
  if (remaining.startsWith('<<')) {
    throw new Error(`${where}: a heredoc source is not supported by this check; copy a file`);
  }
  if (remaining.startsWith('[')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(remaining);
    } catch (cause) {
      throw new Error(`${where}: the JSON form is not a valid JSON array of strings`, { cause });
    }
    if (!Array.isArray(parsed) || parsed.some((a) => typeof a !== 'string')) {
      throw new Error(`${where}: the JSON form is not a valid JSON array of strings`);
    }
    return { flags, args: parsed as string[] };
  }
  return { flags, args: remaining.split(/\s+/u).filter((a) => a !== '') };
}

/** A source as a path relative to the context root (Docker resolves `/x` and `./x` there). */
function contextPath(source: string, where: string): string {
  if (/[*?[\]]/u.test(source) || source.includes('$')) {
    throw new Error(
      `${where}: source ${JSON.stringify(source)} holds a wildcard or a variable, which this ` +
        'check cannot resolve without building; name the files or folders it copies',
    );
  }
  const normalized = posix.normalize(`/${source}`).replace(/^\/+/u, '').replace(/\/+$/u, '');
  return normalized === '' ? '.' : normalized;
}

/** Every `COPY`/`ADD` source `dockerfile` (its text; `name` for messages) takes from the context. */
export function contextCopies(dockerfile: string, name: string): ContextCopy[] {
  const copies: ContextCopy[] = [];
  for (const { line, text } of instructions(dockerfile, name)) {
    const m = /^(COPY|ADD)\s+(.*)$/isu.exec(text);
    if (m === null) continue;
    const instruction = (m[1] as string).toUpperCase() as 'COPY' | 'ADD';
    const where = `${name}:${line}`;
    const { flags, args } = splitArguments(m[2] as string, where);
    if (flags.some((f) => /^--from(=|$)/iu.test(f))) continue;
    if (args.length < 2) {
      throw new Error(`${where}: ${instruction} needs at least one source and a destination`);
    }
    const sources = args
      .slice(0, -1)
      // ADD fetches URLs and Git repositories itself; they are not in the context.
      .filter((s) => !(instruction === 'ADD' && /^(https?:\/\/|git@|[a-z]+:\/\/)/iu.test(s)))
      .map((s) => contextPath(s, where));
    if (sources.length > 0) copies.push({ line, instruction, sources });
  }
  return copies;
}
