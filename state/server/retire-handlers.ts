/**
 * The Journal service's retention RPCs (docs/state-plane.md, "Retirement"): `Retire`,
 * which the control plane calls when a Conversation is deleted under the `checkpoint` or
 * `delete` policy (retire role only), and `GetRetirement` (verifiers).
 */
import type { Logger } from 'pino';
import { AppError } from '../../common/errors';
import {
  RetirePolicy as ProtoRetirePolicy,
  type GetRetirementRequest,
  type RetireRequest,
  type RetireResponse,
  type Retirement,
} from '../../proto/gen/polychrome/state/v1/state';
import type { JournalStore } from '../store/journal-store';
import { retirementToProto } from '../store/retired-partitions';
import { RetirePolicy } from '../store/retirement-types';
import type { CallHandlers } from './call-handlers';
import type { StateService } from './rpc-roles';

/**
 * The policy of a RetireRequest.
 *
 * @throws AppError `invalid_argument` for UNSPECIFIED or an unknown value.
 */
function policyFromProto(partition: string, policy: ProtoRetirePolicy): RetirePolicy {
  if (policy === ProtoRetirePolicy.RETIRE_POLICY_CHECKPOINT) return RetirePolicy.Checkpoint;
  if (policy === ProtoRetirePolicy.RETIRE_POLICY_DELETE) return RetirePolicy.Delete;
  throw new AppError(
    'invalid_argument',
    `${partition}: Retire needs policy RETIRE_POLICY_CHECKPOINT or RETIRE_POLICY_DELETE, got ` +
      `${String(policy)}; a partition kept (policy keep) is not retired at all`,
    { details: { partition, field: 'policy' } },
  );
}

/** The `retire` and `getRetirement` handlers of the Journal service. */
export function retireHandlers(
  store: JournalStore,
  unary: CallHandlers<typeof StateService.Journal>['unary'],
): {
  retire: ReturnType<typeof unary<RetireRequest, RetireResponse>>;
  getRetirement: ReturnType<typeof unary<GetRetirementRequest, Retirement>>;
} {
  return {
    retire: unary<RetireRequest, RetireResponse>('Retire', async (request, { log }) => {
      const result = await store.retire(request.partition, {
        policy: policyFromProto(request.partition, request.policy),
        actor: request.actor,
        reason: request.reason,
        fencingToken: request.fencingToken,
      });
      if (result.retiredNow) logRetired(log, request, result.eventsRemoved);
      return {
        retirement: retirementToProto(result.retirement),
        retiredNow: result.retiredNow,
        eventsRemoved: result.eventsRemoved,
        message: result.message,
      };
    }),
    getRetirement: unary<GetRetirementRequest, Retirement>('GetRetirement', (request) =>
      Promise.resolve(retirementToProto(store.retirement(request.partition))),
    ),
  };
}

function logRetired(log: Logger, request: RetireRequest, eventsRemoved: number): void {
  log.warn(
    {
      partition: request.partition,
      actor: request.actor,
      policy: ProtoRetirePolicy[request.policy],
      eventsRemoved,
    },
    'journal partition retired: its events were removed',
  );
}
