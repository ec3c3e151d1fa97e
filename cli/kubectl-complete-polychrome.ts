import { runEntry } from './entry';
import { runCompletion } from './kube-completion';

/*
 * `kubectl_complete-polychrome`: shell completion of `kubectl polychrome` (kubectl 1.26 and
 * later runs it; docs/kubectl.md, "Completion").
 */
runEntry((args, io) => runCompletion(args, io));
