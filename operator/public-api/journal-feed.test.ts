import { describe, expect, it } from '@jest/globals';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { payloadCodecs } from '../../common/event-kinds';
import { checkSchema } from '../../test/support/openapi-check';
import { prepareEvent } from './journal-feed';

// The SSE frame of a committed event; a resumed dispatch brings its `turn_resumed` along.

const dispatch = (resumed: boolean) => ({
  position: 7,
  kind: 'turn_dispatched',
  payload: payloadCodecs.turn_dispatched
    .encode(
      payloadCodecs.turn_dispatched.fromPartial({
        turnId: 'turn_1',
        attempt: 2,
        leaseHolder: 'replica-b',
        fencingToken: 3,
        messagePosition: 4,
        resumed,
      }),
    )
    .finish(),
});

/** The frames of one prepared event, as an EventSource would split them. */
function frames(buffer: Buffer): { id?: string; event?: string; data?: unknown }[] {
  return buffer
    .toString('utf8')
    .split('\n\n')
    .filter((f) => f !== '')
    .map((frame) => {
      const fields = new Map(
        frame
          .split('\n')
          .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]),
      );
      const data = fields.get('data');
      return {
        id: fields.get('id'),
        event: fields.get('event'),
        data: data === undefined ? undefined : (JSON.parse(data) as unknown),
      };
    });
}

describe('prepareEvent', () => {
  it('follows a resumed turn_dispatched with turn_resumed under the same id, in the same frame', async () => {
    const prepared = prepareEvent(dispatch(true));
    expect(prepared.position).toBe(7);
    const [first, second, ...rest] = frames(prepared.frame);
    expect(rest).toEqual([]);
    expect(first).toMatchObject({ id: '7', event: 'turn_dispatched' });
    expect(second).toEqual({
      id: '7',
      event: 'turn_resumed',
      data: { position: 7, turnId: 'turn_1', attempt: 2 },
    });
    // As the OpenAPI document describes it.
    const path = join(__dirname, '..', '..', 'docs', 'api', 'openapi.json');
    const document = JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
    const schema = { $ref: '#/components/schemas/TurnResumed' };
    expect(checkSchema(document, schema, second?.data)).toEqual([]);
  });

  it('sends no turn_resumed for a first dispatch or one after an answer', () => {
    const only = frames(prepareEvent(dispatch(false)).frame);
    expect(only.map((f) => f.event)).toEqual(['turn_dispatched']);
  });

  it('sends no turn_resumed for a payload that does not decode', () => {
    const broken = { position: 1, kind: 'turn_dispatched', payload: Uint8Array.from([0xff, 0xff]) };
    expect(frames(prepareEvent(broken).frame).map((f) => f.event)).toEqual(['turn_dispatched']);
  });

  it('follows the tool_call opening a delegation thread with thread_started, and its result with thread_closed', async () => {
    const entry = <K extends 'tool_call' | 'tool_result'>(
      kind: K,
      position: number,
      payload: object,
    ) => ({
      position,
      kind,
      payload: payloadCodecs[kind]
        .encode(payloadCodecs[kind].fromPartial(payload))
        .finish(),
    });
    const opened = frames(
      prepareEvent(
        entry('tool_call', 9, {
          turnId: 'turn_1',
          step: 1,
          toolCallId: 'd1',
          toolName: '__delegate_to',
          argsJson: '{"agent":"researcher","task":"find March"}',
          agent: 'lead',
        }),
      ).frame,
    );
    expect(opened.map((f) => [f.id, f.event])).toEqual([
      ['9', 'tool_call'],
      ['9', 'thread_started'],
    ]);
    expect(opened[1]?.data).toEqual({
      position: 9,
      turnId: 'turn_1',
      thread: 'd1',
      agent: 'researcher',
      task: 'find March',
      by: 'lead',
      parentThread: '',
      depth: 1,
    });
    const closed = frames(
      prepareEvent(
        entry('tool_result', 12, {
          turnId: 'turn_1',
          toolCallId: 'd1',
          content: '40 billed',
          delegate: 'researcher',
        }),
      ).frame,
    );
    expect(closed[1]).toEqual({
      id: '12',
      event: 'thread_closed',
      data: {
        position: 12,
        turnId: 'turn_1',
        thread: 'd1',
        agent: 'researcher',
        answer: '40 billed',
        isError: false,
      },
    });
    const path = join(__dirname, '..', '..', 'docs', 'api', 'openapi.json');
    const document = JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
    expect(
      checkSchema(document, { $ref: '#/components/schemas/ThreadStarted' }, opened[1]?.data),
    ).toEqual([]);
    expect(
      checkSchema(document, { $ref: '#/components/schemas/ThreadClosed' }, closed[1]?.data),
    ).toEqual([]);
    // Any other tool call, and a refused delegation's result (no delegate), brings nothing.
    const plain = entry('tool_call', 3, {
      turnId: 't',
      toolCallId: 'c',
      toolName: 'lookup',
      argsJson: '{}',
    });
    const refused = entry('tool_result', 4, {
      turnId: 't',
      toolCallId: 'd2',
      content: 'refused',
      isError: true,
    });
    expect(frames(prepareEvent(plain).frame).map((f) => f.event)).toEqual(['tool_call']);
    expect(frames(prepareEvent(refused).frame).map((f) => f.event)).toEqual(['tool_result']);
  });
});
