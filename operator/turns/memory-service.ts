/**
 * The shell of reading and clearing a conversation's memory through an API (docs/turns.md,
 * "Memory"). Reading is the transcript's read: the same rule decides who may
 * (plan-access.ts `authorizeUse`) and the view is brought up to the head. A clear claims the
 * conversation as a turn does (fenced by its lease; another replica holding it gets the
 * request forwarded), and commits the plan's `memory_cleared` naming who asked together
 * with the erasure of the `memory_set` events it names (docs/turns.md, "Memory").
 */
import { AppError } from '../../common/errors';
import { memoryInOrder, memoryKeyProblem } from '../../common/memory';
import { authorizeMemoryClear, authorizeUse } from './plan-access';
import { attributionOf } from './plan-common';
import { planMemoryClear } from './plan-memory';
import type { ResolveParts } from './resolve-turn';
import type { Caller, ClearMemory, ClearMemoryAnswer, MemoryView } from './turn-service';

/**
 * The conversation's memory, oldest set first.
 *
 * @throws AppError `not_found`, `permission_denied` as the transcript's read.
 */
export async function readMemory(
  parts: ResolveParts,
  caller: Caller,
  conversationId: string,
  signal: AbortSignal,
): Promise<MemoryView> {
  const refusal = authorizeUse(caller, conversationId, parts.conversations.byUid(conversationId));
  if (refusal !== undefined) throw refusal.error;
  const view = await parts.views.refresh(conversationId, signal);
  const entries = memoryInOrder(view.memory).map(
    ({ key, value, position, turnId, toolCallId, setAtMs }) => ({
      key,
      value,
      position,
      turnId,
      toolCallId,
      setAtMs,
    }),
  );
  return { conversationId, entries, head: view.head };
}

/**
 * Clears `request.key` (absent: all memory). Nothing is committed when memory holds nothing
 * to clear.
 *
 * @throws AppError `invalid_argument` for a key that cannot be a memory key; `not_found`,
 *   `permission_denied` (refused before the claim: the transcript's readers who may not
 *   write, such as a Kubernetes reader); `unavailable` when another replica holds the
 *   conversation (details.forwardTo).
 */
export async function clearMemory(
  parts: ResolveParts,
  caller: Caller,
  request: ClearMemory,
  signal: AbortSignal,
): Promise<ClearMemoryAnswer> {
  const uid = request.conversationId;
  const key = request.key ?? '';
  if (request.key !== undefined) {
    const problem = memoryKeyProblem(key);
    if (problem !== undefined) {
      throw new AppError('invalid_argument', `memory key: ${problem}`, {
        details: { field: 'key' },
      });
    }
  }
  const conversation = parts.conversations.byUid(uid);
  // Refused before the claim: someone who may not clear never takes the lease.
  const refusal = authorizeMemoryClear(caller, uid, conversation);
  if (refusal !== undefined) throw refusal.error;
  if (conversation === undefined) throw new AppError('internal', 'unreachable: authorized');
  return parts.claims.run(conversation, signal, async (lease) => {
    const view = await parts.runner.startView(conversation, lease, signal);
    const attribution = attributionOf(caller, parts.runner.fresh(conversation));
    const events = planMemoryClear(view.memory, key, attribution, parts.nowMs());
    const cleared = key === '' ? [...view.memory.keys()] : view.memory.has(key) ? [key] : [];
    const base = {
      conversationId: uid,
      ...(request.key === undefined ? {} : { key }),
      cleared,
      clearedBy: caller.identity,
    };
    const [event] = events;
    if (event === undefined) return { ...base, head: view.head };
    // The clear and the erasure of the memory_set events it names, in one batch.
    const { outcome } = await parts.views.clearMemory(uid, lease, event, signal);
    const erased = outcome.erased.map((e) => e.position);
    return { ...base, position: view.head, head: outcome.head, erasedPositions: erased };
  });
}
