/**
 * What the Kubernetes door serves on each Conversation (docs/kube-api.md): its
 * subresources, each with its method, the RBAC verb kube-apiserver checks and the public
 * API operation that serves it. Data; kube-routes.ts matches paths against it.
 */
import { Operation } from '../public-api/routes';

/** The RBAC verb kube-apiserver checks for a request of this method (non-resource verbs aside). */
export const KubeVerb = { Get: 'get', Create: 'create', Delete: 'delete', Bind: 'bind' } as const;
export type KubeVerb = (typeof KubeVerb)[keyof typeof KubeVerb];

/** One subresource the door serves. */
export interface KubeSubresource {
  readonly name: string;
  readonly method: 'GET' | 'POST' | 'DELETE';
  readonly verb: KubeVerb;
  /** The `kind` in discovery (client-go drops entries without one). */
  readonly kind: string;
  /** The public API operation that serves it. */
  readonly operation: Operation;
  /** Served below one pending request: `{subresource}/{requestId}` (approvals, questions). */
  readonly perRequest?: true;
  /** The operation's parameter that item names. @default 'requestId' */
  readonly itemParam?: 'requestId' | 'key';
}

/**
 * Every subresource served, in discovery order. `log` is the event stream: kube-apiserver
 * counts only a few subresource names (log, exec, attach, proxy, portforward) as
 * long-running, and cuts any other request at 60 s.
 */
export const KUBE_SUBRESOURCES: readonly KubeSubresource[] = [
  {
    name: 'transcript',
    method: 'GET',
    verb: KubeVerb.Get,
    kind: 'Transcript',
    operation: Operation.GetTranscript,
  },
  // Memory reads as the transcript does; a clear is `delete` (of all, or of one key).
  {
    name: 'memory',
    method: 'GET',
    verb: KubeVerb.Get,
    kind: 'Memory',
    operation: Operation.GetMemory,
  },
  {
    name: 'memory',
    method: 'DELETE',
    verb: KubeVerb.Delete,
    kind: 'MemoryCleared',
    operation: Operation.ClearMemory,
  },
  {
    name: 'memory',
    method: 'DELETE',
    verb: KubeVerb.Delete,
    kind: 'MemoryCleared',
    operation: Operation.ClearMemory,
    perRequest: true,
    itemParam: 'key',
  },
  {
    name: 'messages',
    method: 'POST',
    verb: KubeVerb.Create,
    kind: 'TurnReply',
    operation: Operation.PostMessage,
  },
  {
    name: 'log',
    method: 'GET',
    verb: KubeVerb.Get,
    kind: 'EventStream',
    operation: Operation.StreamEvents,
  },
  {
    name: 'export',
    method: 'GET',
    verb: KubeVerb.Get,
    kind: 'JournalExport',
    operation: Operation.ExportConversation,
  },
  {
    name: 'repair',
    method: 'POST',
    verb: KubeVerb.Create,
    kind: 'RepairResult',
    operation: Operation.RepairConversation,
  },
  // Erasure is its own subresource, granted by its own ClusterRole (docs/kube-api.md).
  {
    name: 'erase',
    method: 'POST',
    verb: KubeVerb.Create,
    kind: 'EraseResult',
    operation: Operation.EraseConversation,
  },
  // An answer is `create`, a cancel is `delete`: RBAC tells them apart, so an editor who may
  // answer a question cannot cancel it, and only the admin role answers an approval.
  {
    name: 'approvals',
    method: 'POST',
    verb: KubeVerb.Create,
    kind: 'TurnReply',
    operation: Operation.AnswerApproval,
    perRequest: true,
  },
  {
    name: 'approvals',
    method: 'DELETE',
    verb: KubeVerb.Delete,
    kind: 'TurnReply',
    operation: Operation.AnswerApproval,
    perRequest: true,
  },
  {
    name: 'questions',
    method: 'POST',
    verb: KubeVerb.Create,
    kind: 'TurnReply',
    operation: Operation.AnswerQuestion,
    perRequest: true,
  },
  {
    name: 'questions',
    method: 'DELETE',
    verb: KubeVerb.Delete,
    kind: 'TurnReply',
    operation: Operation.AnswerQuestion,
    perRequest: true,
  },
  // The body names the turn (a subresource path has no room for it).
  {
    name: 'resolve',
    method: 'POST',
    verb: KubeVerb.Create,
    kind: 'ResolveResult',
    operation: Operation.ResolveTurn,
  },
  {
    name: 'accept-rollback',
    method: 'POST',
    verb: KubeVerb.Create,
    kind: 'AcceptRollbackResult',
    operation: Operation.AcceptRollback,
  },
  // Linking a wallet is `create` (the public API's PUT), reading the policy `get`; the
  // admin role grants both (docs/payments.md, "Linking a wallet").
  {
    name: 'payment-policy',
    method: 'POST',
    verb: KubeVerb.Create,
    kind: 'PaymentPolicySet',
    operation: Operation.SetPaymentPolicy,
  },
  {
    name: 'payment-policy',
    method: 'GET',
    verb: KubeVerb.Get,
    kind: 'PaymentPolicy',
    operation: Operation.GetPaymentPolicy,
  },
];
