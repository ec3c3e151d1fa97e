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
});
