import { runCli } from './run-cli';

/*
 * The `polychrome` command (also the kubectl plugin `kubectl-polychrome`). See
 * docs/state-plane.md, "CLI", and `polychrome help`.
 */
runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr }).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error);
    process.exitCode = 3;
  },
);
