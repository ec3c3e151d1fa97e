/*
 * What `kubectl polychrome` offers: its verbs (for dispatch and completion) and its usage
 * text (docs/kubectl.md).
 */

export const KUBE_USAGE = `usage: kubectl polychrome <verb> [NAME] [flags]

Conversations by name, in the namespace of -n (else the context's, else "default"):

  get NAME                           the Conversation: phase, conditions, current turn, journal head
  send NAME TEXT... [--key K]        post a message; print the reply, or the approval / question card
  logs NAME -f [--since N | --last-event-id N]
                                     follow the committed events and live text until Ctrl-C
  approve NAME REQUEST-ID [--deny | --cancel] [--comment C]
                                     answer an approval (RBAC: create conversations/approvals;
                                     --cancel: delete)
  answer NAME REQUEST-ID (TEXT... | --cancel [--comment C])
                                     answer the agent's question (create conversations/questions)
  transcript NAME                    the committed turns
  memory NAME [list]                 what the agent keeps across turns (get conversations/memory)
  memory NAME clear [KEY]            clear all memory, or one key; recorded with who asked
                                     (delete conversations/memory)
  export NAME --actor A [--file F]   the journal export file (stdout unless --file)
  replay NAME --actor A [--public-key KEY]... [--approval-key KEY] [--what-if CHANGE [--live]]
                                     replay the export with no model and no tool
  verify NAME --actor A [--public-key KEY]...
                                     verify the export against the Conversation's checkpoint
                                     and journal keys (--public-key pins others)
  repair NAME --actor A [--dry-run]  excise unreadable journal entries
  erase NAME POSITION... --actor A --reason R [--dry-run]
                                     erase the content of journal entries, recorded in it
                                     (create conversations/erase: its own ClusterRole)
  resolve NAME TURN --ran [--result FILE] | --did-not-run --actor A
                                     settle a quarantined turn (create conversations/resolve)
  accept-rollback NAME --head N --reason TEXT --actor A
                                     go on from a rolled-back journal, recorded in it
                                     (create conversations/accept-rollback)
  dashboard [--port P] [--no-open]   the read-only forensics UI through a local proxy
                                     on 127.0.0.1 (docs/ui.md); prints the URL

  sessions create --persona P [--ttl 720h]
                                     mint a public-API session token (printed once, to stdout);
                                     it never changes the persona's roles
  sessions revoke ID                 revoke that session
  personas set-roles --persona P --roles R1,R2
                                     set a persona's roles (admin, member, edge; "" for none)

The forensic verbs need --actor kubernetes:<your username> (percent-encoded as
docs/kube-api.md says): on this door you act as your Kubernetes identity.

kube flags: --kubeconfig FILE, --context NAME, -n/--namespace NS
output: -o json|yaml (default text)

exit codes: 0 ok, 1 verification failed or turn quarantined, 2 usage error, 3 could not run
(no kubeconfig, refused, not found: the message says what to set or ask for)
`;

/** Every verb, for usage and completion. */
export const KUBE_VERBS = [
  'get',
  'send',
  'logs',
  'approve',
  'answer',
  'transcript',
  'memory',
  'export',
  'replay',
  'verify',
  'repair',
  'erase',
  'resolve',
  'accept-rollback',
  'sessions',
  'personas',
  'dashboard',
  'help',
] as const;
