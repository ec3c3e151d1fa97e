/*
 * What `kubectl polychrome` offers: its verbs (for dispatch and completion) and its usage
 * text (docs/kubectl.md).
 */

/** What --actor is on this door, for the usage and the per-verb help of the verbs that take it. */
export const KUBE_ACTOR_NOTE = `--actor defaults to you: kubernetes:<your username>, the username kube-apiserver
reports for your kubeconfig (\`kubectl auth whoami\`), percent-encoded as docs/kube-api.md
says. On this door you act as your Kubernetes identity; another one is refused.`;

/** The flags and exit codes every verb shares, for the usage and each verb's help. */
export const KUBE_FLAGS_NOTE = `kube flags: --kubeconfig FILE, --context NAME, -n/--namespace NS
output: -o json|yaml (default text)

exit codes: 0 ok, 1 verification failed or turn quarantined, 2 usage error, 3 could not run
(no kubeconfig, refused, not found: the message says what to set or ask for)`;

/** The whole usage: `kubectl polychrome help`. */
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
  export NAME [--actor A] [--file F]
                                     the journal export file (stdout unless --file)
  replay NAME [--actor A] [--public-key KEY]... [--approval-key KEY] [--what-if CHANGE [--live]]
                                     replay the export with no model and no tool
  verify NAME [--actor A] [--public-key KEY]...
                                     verify the export against the Conversation's checkpoint
                                     and journal keys (--public-key pins others)
  repair NAME [--actor A] [--dry-run]
                                     excise unreadable journal entries
  erase NAME POSITION... [--actor A] --reason R [--dry-run]
                                     erase the content of journal entries, recorded in it
                                     (create conversations/erase: its own ClusterRole)
  resolve NAME TURN --ran [--result FILE | --transaction HASH] | --did-not-run [--actor A]
                                     settle a quarantined turn (create conversations/resolve)
  accept-rollback NAME --head N --reason TEXT [--actor A]
                                     go on from a rolled-back journal, recorded in it
                                     (create conversations/accept-rollback)
  payments link NAME --wallet W --limits FILE --reason TEXT [--actor A]
                                     link a wallet with its spend limits (JSON), recorded in
                                     the journal (create conversations/payment-policy)
  payments unlink NAME --reason TEXT [--actor A]
                                     unlink it: payments are off
  payments policy NAME [--actor A]   the payment policy in force (get conversations/payment-policy)
  payments NAME [--actor A] [--public-key KEY]... [--approval-key KEY]
                                     its payments, one line per charge, audited here
                                     (get conversations/export)
  dashboard [--port P] [--no-open]   the read-only forensics UI through a local proxy
                                     on 127.0.0.1 (docs/ui.md); prints the URL

  sessions create --persona P [--ttl 720h]
                                     mint a public-API session token (printed once, to stdout);
                                     it never changes the persona's roles
  sessions revoke ID                 revoke that session
  personas set-roles --persona P --roles R1,R2
                                     set a persona's roles (admin, member, edge; "" for none)
  personas payment-policy set PERSONA --limits FILE [--wallet W] --reason TEXT [--actor A]
                                     give a persona (by id) spend limits (JSON) and a wallet,
                                     recorded with who and why; never your own persona
                                     (create personapaymentpolicies)
  personas payment-policy clear PERSONA --reason TEXT [--actor A]
                                     remove its wallet and limits
  personas payment-policy get PERSONA [--actor A]
                                     its policy and every change (get personapaymentpolicies)
  version                            this plugin's version, and the commit it was built from
  VERB --help, help VERB             one verb's usage

${KUBE_ACTOR_NOTE}

${KUBE_FLAGS_NOTE}
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
  'payments',
  'sessions',
  'personas',
  'dashboard',
  'version',
  'help',
] as const;

/**
 * The verbs that act as someone, recorded with what they do (in the journal, or in the
 * records for `personas payment-policy`): they take --actor.
 */
export const KUBE_ACTOR_VERBS: ReadonlySet<string> = new Set([
  'export',
  'replay',
  'verify',
  'repair',
  'erase',
  'resolve',
  'accept-rollback',
  'payments',
  'personas',
]);
