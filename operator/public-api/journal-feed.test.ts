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
});
