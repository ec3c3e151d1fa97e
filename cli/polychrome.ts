import { runEntry } from './entry';
import { runCli } from './run-cli';

/*
 * The `polychrome` command. See docs/state-plane.md, "CLI", docs/api.md and `polychrome
 * help`; the kubectl plugin is cli/kubectl-polychrome.ts (docs/kubectl.md).
 */
runEntry((args, io) => runCli(args, io));
