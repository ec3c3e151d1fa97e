import { runEntry } from './entry';
import { runKubectlPolychrome } from './kube-cli';

/*
 * The kubectl plugin `kubectl-polychrome` (kubectl runs it for `kubectl polychrome ...`).
 * See docs/kubectl.md and `kubectl polychrome help`.
 */
runEntry((args, io) => runKubectlPolychrome(args, io));
