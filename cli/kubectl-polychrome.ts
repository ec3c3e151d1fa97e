import { runKubectlPolychrome } from './kube-cli';

/*
 * The kubectl plugin `kubectl-polychrome` (kubectl runs it for `kubectl polychrome ...`).
 * See docs/kubectl.md and `kubectl polychrome help`.
 *
 * The first Ctrl-C stops a command that waits (`logs -f` ends with exit 0); a second one
 * exits at once with 130, as the shell would.
 */
const interrupt = new AbortController();
process.once('SIGINT', () => {
  interrupt.abort(new Error('interrupted'));
  process.once('SIGINT', () => process.exit(130));
});

runKubectlPolychrome(process.argv.slice(2), {
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
