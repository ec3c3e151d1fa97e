import { describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import { ScriptedProvider } from './scripted-provider';

describe('the demo script shipped in the harness image', () => {
  it('loads and answers the first turn with a calculator call', async () => {
    const provider = await ScriptedProvider.fromFile(join(__dirname, 'demo-script.yaml'));
    const first = await provider.complete(
      {
        system: '',
        messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
        tools: [],
        toolChoice: 'auto',
      },
      { signal: new AbortController().signal },
    );
    expect(first.content.map((b) => b.type)).toEqual(['text', 'tool_use']);
  });

  it('keeps answering after its script ends, saying it is a demo and how to configure a real model', async () => {
    const provider = await ScriptedProvider.fromFile(join(__dirname, 'demo-script.yaml'));
    const ask = (text: string) =>
      provider.complete(
        {
          system: '',
          messages: [{ role: 'user', content: [{ type: 'text', text }] }],
          tools: [],
          toolChoice: 'auto',
        },
        { signal: new AbortController().signal },
      );
    // The four scripted calls: the calculator turn (two calls) and two more turns.
    for (let call = 0; call < 4; call++) await ask(`message ${call}`);
    for (let call = 0; call < 3; call++) {
      const reply = await ask('and now?');
      expect(reply.stopReason).toBe('end_turn');
      expect(reply.content).toHaveLength(1);
      const text = reply.content[0]?.type === 'text' ? reply.content[0].text : '';
      expect(text).toMatch(/scripted demo model/);
      expect(text).toContain('ANTHROPIC_API_KEY');
      expect(text).toContain('anthropic-api-key of the polychrome-harness Secret');
    }
  });
});
