import { describe, expect, it } from '@jest/globals';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ModelRequest } from '../../common/model/model-port';
import { ScriptedProvider } from './scripted-provider';

const request: ModelRequest = { messages: [], tools: [], toolChoice: 'auto' };
const live = () => ({ signal: new AbortController().signal });

const yamlScript = `
name: refund-demo
model: scripted-sonnet
replies:
  - content:
      - text: Checking.
      - tool_use: { name: calculator, input: { expression: "2 + 2" } }
      - tool_use: { id: own-id, name: current_step }
    usage: { input_tokens: 12, output_tokens: 7 }
  - text: "It is 4."
    stop_reason: max_tokens
`;

describe('ScriptedProvider', () => {
  it('plays a YAML file in order, with deterministic tool ids', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'scripted-'));
    const path = join(dir, 'demo.yaml');
    await writeFile(path, yamlScript);
    const model = await ScriptedProvider.fromFile(path);
    expect(model.name).toBe('refund-demo');
    await expect(model.complete(request, live())).resolves.toEqual({
      model: 'scripted-sonnet',
      content: [
        { type: 'text', text: 'Checking.' },
        { type: 'tool_use', id: 'toolu_1_1', name: 'calculator', input: { expression: '2 + 2' } },
        { type: 'tool_use', id: 'own-id', name: 'current_step', input: {} },
      ],
      stopReason: 'tool_use',
      usage: { inputTokens: 12, outputTokens: 7 },
    });
    await expect(model.complete(request, live())).resolves.toEqual({
      model: 'scripted-sonnet',
      content: [{ type: 'text', text: 'It is 4.' }],
      stopReason: 'max_tokens',
      usage: { inputTokens: 0, outputTokens: 0 },
    });
    expect(model.callCount).toBe(2);
    expect(model.requests).toEqual([request, request]);
  });

  it('reads JSON and names the script after the file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'scripted-'));
    const path = join(dir, 'greeting.json');
    await writeFile(path, JSON.stringify({ replies: [{ text: 'hi' }] }));
    const model = await ScriptedProvider.fromFile(path);
    expect(model.name).toBe('greeting');
    await expect(model.complete(request, live())).resolves.toMatchObject({
      model: 'scripted',
      content: [{ type: 'text', text: 'hi' }],
      stopReason: 'end_turn',
    });
  });

  it('says which script ran out and at which call', async () => {
    const model = ScriptedProvider.parse('replies: [{ text: one }]', 'short');
    await model.complete(request, live());
    await expect(model.complete(request, live())).rejects.toMatchObject({
      code: 'failed_precondition',
      message:
        'scripted model short: no reply for model call 2; the script has 1 replies. Add replies to the script or shorten the turn.',
    });
    expect(model.callCount).toBe(2);
  });

  it('plays after_script for every call past the last reply', async () => {
    const model = ScriptedProvider.parse(
      'replies: [{ text: one }]\nafter_script: { text: that was all }',
      'short',
    );
    const texts: string[] = [];
    for (let call = 0; call < 3; call++) {
      const reply = await model.complete(request, live());
      expect(reply.stopReason).toBe('end_turn');
      texts.push(reply.content.map((b) => (b.type === 'text' ? b.text : b.type)).join());
    }
    expect(texts).toEqual(['one', 'that was all', 'that was all']);
    expect(model.callCount).toBe(3);
  });

  it('takes only text for after_script (a tool call repeated for ever would only burn steps)', () => {
    expect(() =>
      ScriptedProvider.parse(
        'replies: []\nafter_script: { content: [{ tool_use: { name: calculator } }] }',
        'loop',
      ),
    ).toThrow(/model script loop does not fit the script format/);
  });

  it('plays the replies again from the first with repeat, with fresh tool call ids', async () => {
    const model = ScriptedProvider.parse(
      'repeat: true\nreplies:\n  - content: [{ tool_use: { name: calculator } }]\n  - text: done',
      'again',
    );
    const shapes: string[] = [];
    for (let call = 0; call < 4; call++) {
      const reply = await model.complete(request, live());
      shapes.push(reply.content.map((b) => (b.type === 'text' ? b.text : b.id)).join());
    }
    expect(shapes).toEqual(['toolu_1_0', 'done', 'toolu_3_0', 'done']);
  });

  it('refuses repeat with after_script, and a repeat of tool calls only, saying what to do', () => {
    expect(() =>
      ScriptedProvider.parse(
        'repeat: true\nreplies: [{ text: a }]\nafter_script: { text: b }',
        'both',
      ),
    ).toThrow(/set after_script or repeat, not both/);
    expect(() =>
      ScriptedProvider.parse(
        'repeat: true\nreplies: [{ content: [{ tool_use: { name: calculator } }] }]',
        'loop',
      ),
    ).toThrow(/repeat needs a reply without a tool call.*add a text reply/);
  });

  it('throws a scripted error with its code', async () => {
    const model = ScriptedProvider.parse(
      'replies: [{ error: { code: resource_exhausted, message: rate limited } }]',
      'errs',
    );
    await expect(model.complete(request, live())).rejects.toMatchObject({
      code: 'resource_exhausted',
      message: 'rate limited',
    });
  });

  it('streams text fragments that join to the text', async () => {
    const model = new ScriptedProvider({
      replies: [{ content: [{ text: 'Hello  big\nworld ' }, { text: 'again' }] }],
    });
    const deltas: string[] = [];
    await model.complete(request, { ...live(), onTextDelta: (d) => deltas.push(d) });
    expect(deltas).toEqual(['Hello  ', 'big\n', 'world ', 'again']);
  });

  it('stops streaming when the signal aborts', async () => {
    const model = new ScriptedProvider({ replies: [{ text: 'a b c' }] }, 'abortable');
    const controller = new AbortController();
    const deltas: string[] = [];
    const call = model.complete(request, {
      signal: controller.signal,
      onTextDelta: (d) => {
        deltas.push(d);
        controller.abort();
      },
    });
    await expect(call).rejects.toMatchObject({
      code: 'cancelled',
      message: 'scripted model abortable: the call was cancelled',
    });
    expect(deltas).toEqual(['a ']);
  });

  const unfit = 'model script bad does not fit the script format:\n';
  it.each([
    ['not YAML', 'replies: [', 'model script bad: not valid YAML or JSON'],
    [
      'no replies',
      'name: x',
      unfit + '✖ Invalid input: expected array, received undefined\n  → at replies',
    ],
    [
      'an unknown stop reason',
      'replies: [{ text: a, stop_reason: sleepy }]',
      unfit +
        '✖ Invalid option: expected one of "end_turn"|"tool_use"|"max_tokens"|"stop_sequence"|"refusal"|"other"\n  → at replies[0].stop_reason',
    ],
    [
      'a tool_use without a name',
      'replies: [{ content: [{ tool_use: { id: a } }] }]',
      unfit +
        '✖ Invalid input: expected string, received undefined\n  → at replies[0].content[0].tool_use.name',
    ],
    [
      'an unknown field',
      'replies: [{ txt: a }]',
      unfit +
        '✖ Unrecognized key: "txt"\n  → at replies[0]\n✖ Invalid input: expected string, received undefined\n  → at replies[0].text',
    ],
  ])('rejects a script with %s, naming the field', (_name, text, message) => {
    expect(() => ScriptedProvider.parse(text, 'bad')).toThrow(
      expect.objectContaining({ code: 'invalid_argument', message }),
    );
  });

  it('reports a missing file as not_found', async () => {
    await expect(
      ScriptedProvider.fromFile(join(tmpdir(), 'no-such-script.yaml')),
    ).rejects.toMatchObject({
      code: 'not_found',
      message: 'model script no-such-script: cannot read the file; check the path',
    });
  });
});
