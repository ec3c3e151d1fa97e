/*
 * docs/journal-format.md, section 12, pinned: the example `turn_resolved` payload and its
 * leaf digest are read from the doc and recomputed with the real codec and leaf hash.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { decodePayload, encodePayload } from '../../common/event-kinds';
import { ResolveDecision } from '../../proto/gen/polychrome/events/v1/events';
import { leafDigest } from './leaf-digest';
import { nodeSha256 } from './node-sha256';

async function example(): Promise<{ payload: string; leaf: string }> {
  const text = await readFile(join(__dirname, '..', '..', 'docs', 'journal-format.md'), 'utf8');
  const section = text.slice(text.indexOf('## 12. turn_resolved'));
  const match = /payload = ([0-9a-f\s]+?)\n\s+leaf {4}= ([0-9a-f]{64})/u.exec(section);
  if (match === null) throw new Error('docs/journal-format.md section 12 has no example');
  return { payload: (match[1] ?? '').replace(/\s+/gu, ''), leaf: match[2] ?? '' };
}

describe('docs/journal-format.md: turn_resolved', () => {
  it('encodes the example to the payload and leaf digest the doc shows', async () => {
    const doc = await example();
    const payload = encodePayload('turn_resolved', {
      turnId: 'turn_1',
      decision: ResolveDecision.RESOLVE_DECISION_RAN,
      toolCallId: 'toolu_pay',
      result: 'sent',
      resultUnknown: false,
      actor: 'email:root@example.com',
      caller: 'email:root@example.com',
      resolvedAtMs: 1_700_000_000_000,
      quarantinePosition: 11,
      // No session (a caller without one, or a journal from before the field): the bytes
      // are the ones the page pinned before `session` existed.
      session: '',
    });
    expect(Buffer.from(payload).toString('hex')).toBe(doc.payload);
    const leaf = leafDigest(nodeSha256, 12, 'turn_resolved', payload);
    expect(Buffer.from(leaf).toString('hex')).toBe(doc.leaf);
    expect(
      decodePayload('turn_resolved', new Uint8Array(Buffer.from(doc.payload, 'hex'))),
    ).toMatchObject({ decision: ResolveDecision.RESOLVE_DECISION_RAN, quarantinePosition: 11 });
  });
});
