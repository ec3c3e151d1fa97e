import { afterEach, describe, expect, it } from '@jest/globals';

import { ALICE, TOKENS } from '../test/support/api-fixtures';
import { committedEvents, startApiStack, type ApiStack } from '../test/support/api-stack';
import { textReply } from '../test/support/real-turns';
import { ExitCode } from './cli-support';
import { envOf } from './testdata/api-expectations';
import { runCaptured } from './testdata/captured-run';

/*
 * `polychrome memory ID list | clear [KEY]`: the CLI's own code against the real public API
 * on 127.0.0.1:0, over the real coordinator and harness with the scripted model (the same
 * command runs over the Kubernetes door as `kubectl polychrome memory NAME`).
 */

let stack: ApiStack | undefined;

afterEach(async () => {
  await stack?.api.close();
  stack = undefined;
});

/** A conversation of Alice's whose agent kept `city` and `pet` in turn one. */
async function remembered(): Promise<ApiStack> {
  stack = await startApiStack({
    spec: { tools: { builtin: ['memory'] } },
    replies: [
      {
        content: [
          {
            tool_use: {
              id: 't1',
              name: 'memory',
              input: { action: 'set', key: 'city', value: 'Lisbon' },
            },
          },
          {
            tool_use: {
              id: 't2',
              name: 'memory',
              input: { action: 'set', key: 'pet', value: 'a cat' },
            },
          },
        ],
      },
      textReply('noted'),
    ],
  });
  const sent = await runCaptured(['send', stack.conversationId, 'remember this'], stack.env);
  expect(sent.code).toBe(ExitCode.Ok);
  return stack;
}

describe('polychrome memory', () => {
  it('lists the entries, oldest first, as text and as JSON', async () => {
    const s = await remembered();
    const text = await runCaptured(['memory', s.conversationId, 'list'], s.env);
    expect(text).toMatchObject({ code: ExitCode.Ok, stderr: '' });
    const lines = text.stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^city = "Lisbon" {2}\(set at position \d+, turn turn_/u);
    expect(lines[1]).toMatch(/^pet = "a cat" /u);
    const json = await runCaptured(['memory', s.conversationId, '--format', 'json'], s.env);
    expect(JSON.parse(json.stdout)).toMatchObject({
      entries: [
        { key: 'city', value: 'Lisbon' },
        { key: 'pet', value: 'a cat' },
      ],
    });
  });

  it('clears one key, then all, each recorded with who asked', async () => {
    const s = await remembered();
    const one = await runCaptured(['memory', s.conversationId, 'clear', 'pet'], s.env);
    expect(one.code).toBe(ExitCode.Ok);
    expect(one.stdout).toMatch(
      new RegExp(
        `^cleared "pet" \\(memory_cleared at position \\d+, recorded as asked by ${ALICE.identity}\\)`,
        'u',
      ),
    );
    const left = await runCaptured(['memory', s.conversationId], s.env);
    expect(left.stdout).toMatch(/^city = "Lisbon"/u);
    const all = await runCaptured(['memory', s.conversationId, 'clear'], s.env);
    expect(all.stdout).toContain('cleared "city"');
    const empty = await runCaptured(['memory', s.conversationId], s.env);
    expect(empty.stdout).toBe('memory is empty\n');
    const nothing = await runCaptured(['memory', s.conversationId, 'clear'], s.env);
    expect(nothing.stdout).toBe('nothing to clear: memory is empty; nothing was recorded\n');
    const cleared = (await committedEvents(s.api, s.conversationId)).filter(
      (e) => e.kind === 'memory_cleared',
    );
    expect(cleared.map((e) => e.payload)).toMatchObject([
      { key: 'pet', attribution: { caller: ALICE.identity } },
      { attribution: { caller: ALICE.identity } },
    ]);
  });

  it('refuses another member with the API message, and a bad action as usage', async () => {
    const s = await remembered();
    const bob = await runCaptured(['memory', s.conversationId, 'clear'], envOf(s.api, TOKENS.bob));
    expect(bob.code).toBe(ExitCode.Error);
    expect(bob.stderr).toContain('permission_denied');
    const usage = await runCaptured(['memory', s.conversationId, 'forget'], s.env);
    expect(usage.code).toBe(ExitCode.Usage);
    expect(usage.stderr).toContain('memory takes "list" or "clear [KEY]"');
    expect(
      (await committedEvents(s.api, s.conversationId)).filter((e) => e.kind === 'memory_cleared'),
    ).toHaveLength(0);
  });
});
