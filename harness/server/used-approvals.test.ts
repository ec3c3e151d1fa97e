import { describe, expect, it } from '@jest/globals';
import { requestIds } from '../../common/request-ids';
import type { ApprovalAnswer, TurnStep } from '../turn/turn-records';
import { UsedApprovals } from './used-approvals';

const requestId = requestIds.approvalRequestId('t-1', 'toolu_1');
const answer = (approvalId: string, request = requestId): ApprovalAnswer => ({
  turnId: 't-1',
  requestId: request,
  toolName: 'refund_payment',
  argsSha256: new Uint8Array(32),
  decision: 'approved',
  answeredBy: 'web:alice',
  keyId: 'k',
  signature: new Uint8Array(64),
  answeredAtMs: 0,
  comment: '',
  scope: { conversation: 'c-1', expiresAtMs: 10, approvalId },
});
const toolCall = (approvalRequestId: string): TurnStep => ({
  kind: 'tool_call',
  record: {
    turnId: 't-1',
    step: 1,
    toolCallId: 'toolu_1',
    toolName: 'refund_payment',
    argsJson: '{}',
    effect: 'side_effect',
    approvalRequestId,
  },
});
const result = (denied: boolean): TurnStep => ({
  kind: 'tool_result',
  record: { turnId: 't-1', toolCallId: 'toolu_1', content: 'x', isError: false, denied },
});

describe('UsedApprovals', () => {
  it('a new pod marks what the recorded history consumed: the approved tool_call, the denied result', () => {
    const approved = new UsedApprovals(requestIds);
    approved.noteHistory([toolCall(requestId)], [answer('apv_a'), answer('apv_b', 'apr_other')]);
    expect([approved.has('apv_a'), approved.has('apv_b')]).toEqual([true, false]);
    const denied = new UsedApprovals(requestIds);
    denied.noteHistory([result(true)], [answer('apv_d')]);
    expect(denied.has('apv_d')).toBe(true);
  });

  it('marks nothing for steps that consume no answer', () => {
    const used = new UsedApprovals(requestIds);
    used.noteHistory([toolCall(''), result(false)], [answer('apv_a')]);
    expect(used.has('apv_a')).toBe(false);
    expect(used.useFor('c-1', 5)).toMatchObject({ conversation: 'c-1', nowMs: 5 });
  });
});
