/**
 * The turn loop's request ids come from common/request-ids.ts: the control plane derives
 * the same ids to check what the harness sends before it commits it.
 */
export { requestIds, type RequestIds } from '../../common/request-ids';
