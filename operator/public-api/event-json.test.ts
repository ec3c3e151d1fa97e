import { describe, expect, it } from '@jest/globals';
import { encodePayload, EventKind } from '../../common/event-kinds';
import { eventData } from './event-json';

describe('eventData', () => {
  it('decodes every known kind into proto3 JSON', () => {
    for (const kind of Object.values(EventKind)) {
      const data = eventData({ position: 7, kind, payload: new Uint8Array() });
      expect({ kind, data }).toEqual({ kind, data: { position: 7, kind, payload: {} } });
    }
  });

  it('uses camelCase names, base64 bytes and numbers for 64-bit integers', () => {
    const payload = encodePayload(EventKind.ApprovalRequest, {
      turnId: 't-1',
      requestId: 'r-1',
      toolCallId: 'c-1',
      toolName: 'send_email',
      argsJson: '{"to":"a"}',
      argsSha256: Buffer.from([0xde, 0xad]),
      reason: 'side effects',
      requiredApprover: '',
      requestedAtMs: 0,
    });
    expect(eventData({ position: 3, kind: 'approval_request', payload })).toEqual({
      position: 3,
      kind: 'approval_request',
      payload: {
        turnId: 't-1',
        requestId: 'r-1',
        toolCallId: 'c-1',
        toolName: 'send_email',
        argsJson: '{"to":"a"}',
        argsSha256: '3q0=',
        reason: 'side effects',
      },
    });
    const dispatched = encodePayload(EventKind.TurnDispatched, {
      turnId: 't-1',
      attempt: 2,
      leaseHolder: 'replica-a',
      fencingToken: 2 ** 40,
      historyFrom: 0,
      summaryPosition: 0,
      attribution: undefined,
      dispatchedAtMs: 1_767_225_600_000,
      messagePosition: 12,
      resumed: false,
      agentRosterSha256: Buffer.alloc(0),
    });
    expect(
      eventData({ position: 13, kind: 'turn_dispatched', payload: dispatched }).payload,
    ).toEqual({
      turnId: 't-1',
      attempt: 2,
      leaseHolder: 'replica-a',
      fencingToken: 2 ** 40,
      dispatchedAtMs: 1_767_225_600_000,
      messagePosition: 12,
    });
  });

  it('sends an unknown kind or undecodable bytes raw, as base64', () => {
    expect(
      eventData({ position: 1, kind: 'from_the_future', payload: new Uint8Array([1, 2]) }),
    ).toEqual({
      position: 1,
      kind: 'from_the_future',
      payload: null,
      payloadBase64: 'AQI=',
    });
    // Field 1 as a length-delimited string that claims 100 bytes but has 1.
    expect(
      eventData({ position: 2, kind: 'turn_complete', payload: new Uint8Array([0x0a, 100, 65]) }),
    ).toEqual({
      position: 2,
      kind: 'turn_complete',
      payload: null,
      payloadBase64: 'CmRB',
    });
  });
});
