import type { CliIo } from './cli-support';

/*
 * What the CLI's entry points share (cli/polychrome.ts, cli/kubectl-polychrome.ts,
 * cli/kubectl-complete-polychrome.ts): the process's streams, Ctrl-C, the exit code.
 *
 * The first Ctrl-C stops a command that waits (`stream`, `logs -f` end with exit 0); a
 * second one exits at once with 130, as the shell would.
 */
export function runEntry(run: (args: readonly string[], io: CliIo) => Promise<number>): void {
  const interrupt = new AbortController();
  process.once('SIGINT', () => {
    interrupt.abort(new Error('interrupted'));
    process.once('SIGINT', () => process.exit(130));
  });
  run(process.argv.slice(2), {
    stdout: process.stdout,
    stderr: process.stderr,
    signal: interrupt.signal,
  }).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = 3;
    },
  );
}
