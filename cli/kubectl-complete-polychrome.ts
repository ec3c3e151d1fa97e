import { runCompletion } from './kube-completion';

/*
 * `kubectl_complete-polychrome`: shell completion of `kubectl polychrome` (kubectl 1.26 and
 * later runs it; docs/kubectl.md, "Completion").
 */
runCompletion(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr }).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error);
    process.exitCode = 3;
  },
);
