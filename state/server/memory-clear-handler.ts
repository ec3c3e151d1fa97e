/**
 * The Journal service's `ClearMemory` (docs/state-plane.md, "Memory clears"): a person's
 * `memory_cleared` and the erasure of the `memory_set` entries it names, in one atomic
 * batch (state/store/journal-memory-clear.ts). The writer role calls it; the store checks
 * that nothing but those `memory_set`s is erased.
 */
import type { SignedRoot } from '../../proto/gen/polychrome/events/v1/events';
import type {
  ClearMemoryRequest,
  ClearMemoryResponse,
} from '../../proto/gen/polychrome/state/v1/state';
import type { StoredSignedRoot } from '../store/append-batch';
import type { JournalStore } from '../store/journal-store';
import type { CallHandlers } from './call-handlers';
import type { StateService } from './rpc-roles';

/** The `clearMemory` handler of the Journal service. */
export function memoryClearHandlers(
  store: JournalStore,
  unary: CallHandlers<typeof StateService.Journal>['unary'],
  signedRootToProto: (root: StoredSignedRoot) => SignedRoot,
  track?: (work: Promise<unknown>) => void,
): { clearMemory: ReturnType<typeof unary<ClearMemoryRequest, ClearMemoryResponse>> } {
  return {
    clearMemory: unary<ClearMemoryRequest, ClearMemoryResponse>(
      'ClearMemory',
      async (request, { signal, log }) => {
        const { partition } = request;
        const work = store.clearMemory(partition, request.expectedHead, request.memoryCleared, {
          signal,
          fencingToken: request.fencingToken,
          ...(request.expectedRoot.length === 0 ? {} : { expectedRoot: request.expectedRoot }),
        });
        track?.(work);
        const result = await work;
        const positions = result.erased.map((e) => e.position);
        log.info({ partition, positions }, 'memory cleared: memory_set entries erased');
        return {
          firstPosition: result.firstPosition,
          head: result.head,
          signedRootPosition: result.signedRoot.position,
          signedRoot: signedRootToProto(result.signedRoot),
          erased: result.erased.map((e) => ({
            position: e.position,
            leafDigest: Buffer.from(e.leaf),
            kind: e.kind,
            turnId: e.turnId,
          })),
        };
      },
    ),
  };
}
