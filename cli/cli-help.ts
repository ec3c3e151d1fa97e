/*
 * `polychrome help COMMAND` and `polychrome COMMAND --help`: one command's part of the usage
 * (run-cli.ts's USAGE, handed in), text only, so both answer as fast as `help` does.
 *
 * The usage's shape, which this reads:
 * - an entry is one or more header lines `  polychrome WORDS ...` and the lines indented
 *   further under them (one description may serve several forms);
 * - a note is a paragraph indented two spaces that is not a header (`  --checkpoint ...`,
 *   `  CHANGE is one of: ...`, `  Journal keys ...`); it belongs to the entries that name its
 *   first word;
 * - a section starts at column 0 with a heading ending in `:` (`api flags ...:`) and runs to
 *   the next blank line; the entries that name its heading's first two words use it;
 * - the line `--json ...` says what --json is, for the entries that take --format.
 */

const HEADER = /^ {2}polychrome /u;
const FURTHER = /^ {3,}\S/u;

/** The paragraphs of `usage` that begin with a line indented exactly two spaces. */
function indentedParagraphs(lines: readonly string[]): string[][] {
  const out: string[][] = [];
  let current: string[] | undefined;
  for (const line of lines) {
    const header = HEADER.test(line);
    if (/^ {2}\S/u.test(line)) {
      // Consecutive header lines are one entry; anything else two-space starts a paragraph.
      const previous = current?.at(-1);
      if (current !== undefined && header && previous !== undefined && HEADER.test(previous)) {
        current.push(line);
      } else {
        current = [line];
        out.push(current);
      }
    } else if (current !== undefined && FURTHER.test(line)) current.push(line);
    else current = undefined;
  }
  return out;
}

/** Whether `line` is a header of the command `words` (or of one of its subcommands). */
function headerOf(line: string, words: readonly string[]): boolean {
  const head = `  polychrome ${words.join(' ')}`;
  return line === head || line.startsWith(`${head} `);
}

/** The column-0 sections (`heading:` to the next blank line), by heading. */
function sections(lines: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (!/^[a-z][^:]*:$/u.test(line)) continue;
    const end = lines.indexOf('', i);
    out.set(line, lines.slice(i, end === -1 ? undefined : end).join('\n'));
  }
  return out;
}

/**
 * The help of the command `words` names: its entries, the notes and flag sections they
 * refer to, and the exit codes. The longest leading part of `words` that names a command
 * decides (`state verify conv-1` is `state verify`); `undefined` when none does.
 */
export function commandUsage(usage: string, words: readonly string[]): string | undefined {
  const lines = usage.split('\n');
  const paragraphs = indentedParagraphs(lines);
  for (let n = words.length; n > 0; n--) {
    const command = words.slice(0, n);
    const entries = paragraphs.filter((p) => p.some((line) => headerOf(line, command)));
    if (entries.length === 0) continue;
    const text = entries.flat().join('\n');
    const notes = paragraphs.filter((p) => {
      const first = /^ {2}(\S+)/u.exec(p[0] ?? '')?.[1];
      return !HEADER.test(p[0] ?? '') && first !== undefined && text.includes(first);
    });
    const used = [...sections(lines)]
      .filter(([heading]) => text.includes(`[${heading.split(' ').slice(0, 2).join(' ')}]`))
      .map(([, body]) => body);
    const exitCodes = usage.slice(usage.lastIndexOf('\nexit codes:') + 1).trimEnd();
    return `${[
      `usage: polychrome ${command.join(' ')} ...`,
      ...entries.map((p) => p.join('\n')),
      ...notes.map((p) => p.join('\n')),
      ...used,
      ...(text.includes('--format') ? lines.filter((line) => line.startsWith('--json ')) : []),
      exitCodes,
    ].join('\n\n')}\n`;
  }
  return undefined;
}

/**
 * The words of `args` before `--` that are not flags, and whether `--help` (or `-h`) came
 * before `--` (after it, it is text: `send ID -- --help` sends "--help").
 */
export function helpAsked(args: readonly string[]): { asked: boolean; words: string[] } {
  const end = args.indexOf('--');
  const before = end === -1 ? args : args.slice(0, end);
  return {
    asked: before.includes('--help') || before.includes('-h'),
    words: before.filter((a) => !a.startsWith('-')),
  };
}
