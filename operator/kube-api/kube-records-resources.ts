/**
 * The Kubernetes door's cluster-scoped resources that reach the state plane's records
 * (docs/kube-api.md): `sessions` and `personaroles` (kube-sessions.ts) and
 * `personapaymentpolicies` (kube-persona-policies.ts), over the records link the control
 * plane already holds and the door's cluster-scoped SubjectAccessReview. No new credential.
 */
import type { RecordsClient } from '../../common/records-client';
import type { KubeDoor } from './kube-door';
import { KubePersonaPolicies } from './kube-persona-policies';
import { KubeSessions, type SessionRecords } from './kube-sessions';

/** What the listener takes for them (KubeListenerOptions). */
export interface KubeRecordsResources {
  readonly sessions: KubeSessions;
  readonly personaPolicies: KubePersonaPolicies;
}

/** The records resources over `records`, each admitted by `door`'s SubjectAccessReview. */
export function kubeRecordsResources(
  records: SessionRecords & Pick<RecordsClient, 'findPersonaByIdentity'>,
  door: Pick<KubeDoor, 'admitCluster'>,
): KubeRecordsResources {
  const admit = door.admitCluster.bind(door);
  return {
    sessions: new KubeSessions(records, admit),
    personaPolicies: new KubePersonaPolicies(records, admit),
  };
}
