import { Writable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { componentLogger, createRootLogger, LogComponent, REDACTED } from './log';

function capture(): { stream: Writable; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString('utf8'));
      callback();
    },
  });
  const lines = (): Record<string, unknown>[] =>
    chunks
      .join('')
      .split('\n')
      .filter((line) => line !== '')
      .map((line): Record<string, unknown> => {
        const parsed: unknown = JSON.parse(line);
        if (typeof parsed !== 'object' || parsed === null)
          throw new Error(`not an object: ${line}`);
        return Object.fromEntries(Object.entries(parsed));
      });
  return { stream, lines };
}

describe('createRootLogger', () => {
  it('redacts API keys, authorization headers, tokens and tool args by path', () => {
    const out = capture();
    const root = createRootLogger({ service: 'harness', destination: out.stream });
    root.info(
      {
        apiKey: 'sk-top',
        anthropic: { apiKey: 'sk-nested' },
        request: { headers: { authorization: 'Bearer abc' } },
        metadata: { authorization: 'Bearer def' },
        token: 'tok',
        config: { authToken: 'tok2' },
        args: { cardNumber: '4111' },
        call: { args: { password: 'p' } },
        tool: 'calculator',
      },
      'call started',
    );
    const [line] = out.lines();
    expect(line).toMatchObject({
      level: 'info',
      service: 'harness',
      msg: 'call started',
      apiKey: REDACTED,
      anthropic: { apiKey: REDACTED },
      request: { headers: { authorization: REDACTED } },
      metadata: { authorization: REDACTED },
      token: REDACTED,
      config: { authToken: REDACTED },
      args: REDACTED,
      call: { args: REDACTED },
      tool: 'calculator',
    });
    expect(JSON.stringify(line)).not.toMatch(/sk-top|sk-nested|abc|def|tok2|4111/u);
  });

  it('puts component and context on children and honours the level', () => {
    const out = capture();
    const root = createRootLogger({ service: 'harness', level: 'warn', destination: out.stream });
    const turn = componentLogger(root, LogComponent.Turn, { turn: 't-1' });
    turn.info('turn started');
    turn.warn({ attempt: 2 }, 'turn retried');
    expect(out.lines()).toEqual([
      expect.objectContaining({
        level: 'warn',
        component: 'turn',
        turn: 't-1',
        attempt: 2,
        msg: 'turn retried',
      }),
    ]);
  });
});
