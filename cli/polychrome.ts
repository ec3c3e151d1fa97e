import { runCli } from './run-cli';

/*
 * The `polychrome` command (also the kubectl plugin `kubectl-polychrome`). See
 * docs/state-plane.md, "CLI", docs/api.md and `polychrome help`.
 *
 * The first Ctrl-C stops a command that waits (`stream` ends with exit 0); a second one
 * exits at once with 130, as the shell would.
 */
const interrupt = new AbortController();
process.once('SIGINT', () => {
  interrupt.abort(new Error('interrupted'));
  process.once('SIGINT', () => process.exit(130));
});

runCli(process.argv.slice(2), {
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
