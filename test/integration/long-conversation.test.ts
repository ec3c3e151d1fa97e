import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Role } from '../../common/persona-roles';
import {
  echoReply,
  MessagesApiServer,
  type RecordedRequest,
  type ScriptedReply,
} from '../support/messages-api-server';
import { polychrome } from './support/polychrome-cli';
import { apiCall } from './support/public-api';
import { startTurnStack, type TurnStack } from './support/turn-stack';

// docs/turns.md, "The history window": no conversation dies of its own length. Real turns
// on the real stack, the harness's model a Messages API server that refuses, as the API
// does, every request whose messages pass a context limit far below the conversation's
// length. 2,000 turns, every 100th near the largest message the public API takes, keep
// answering; the requests the model gets stay under the limit and stop growing once the
// window is full; `polychrome conversation replay` of the whole conversation is ok.

/** The model's context, as the bytes of a request's `messages` JSON. */
const CONTEXT_LIMIT_BYTES = 150_000;
/** The agent's history budget: about 100 KB of text, which leaves room for a large message. */
const HISTORY_TOKENS = 25_000;
const TURNS = 2_000;
/** Near the public API's largest message (32,768 characters). */
const LARGE_TEXT_CHARS = 32_000;

describe('a conversation of 2,000 turns against a model with a small context', () => {
  let stack: TurnStack;
  let messages: MessagesApiServer;
  let owner: string;
  let admin: string;
  let uid: string;
  /** The size of each request's `messages`, in order; refused ones too. */
  const sizes: number[] = [];
  let refused = 0;

  const withinContext = (request: RecordedRequest): ScriptedReply => {
    const body = request.body as { messages: unknown[] };
    const bytes = Buffer.byteLength(JSON.stringify(body.messages));
    sizes.push(bytes);
    // Kept by the server for assertions; this test keeps only the sizes.
    messages.requests.length = 0;
    if (bytes > CONTEXT_LIMIT_BYTES) {
      refused += 1;
      return {
        kind: 'error',
        status: 400,
        message: `prompt is too long: ${bytes} bytes > ${CONTEXT_LIMIT_BYTES} maximum`,
      };
    }
    return echoReply(request.body);
  };

  beforeAll(async () => {
    messages = await MessagesApiServer.start({ respond: withinContext });
    stack = await startTurnStack({
      namespacePrefix: 'long',
      messages,
      // One client posting turn after turn passes the per-caller request rate (docs/api.md,
      // "Limits per caller"), which is not what this test is about.
      controlPlaneEnv: {
        POLYCHROME_LIMIT_REQUESTS_PER_SECOND: '0',
        POLYCHROME_LIMIT_REQUEST_BURST: '0',
      },
    });
    owner = await stack.mintToken('test:long-owner');
    admin = await stack.mintToken('test:long-admin', [Role.Admin]);
    uid = await stack.createConversation('long', {
      owner: 'test:long-owner',
      agent: { historyTokens: HISTORY_TOKENS },
    });
  }, 180_000);
  afterAll(async () => {
    await stack?.stop();
    await messages?.close();
  });

  it('keeps answering every turn, within the context, and replays ok', async () => {
    await stack.withDiagnostics(async () => {
      let conversationBytes = 0;
      for (let i = 0; i < TURNS; i++) {
        const text =
          i % 100 === 99
            ? `large ${i} `.padEnd(LARGE_TEXT_CHARS, 'x')
            : `turn ${i} of the long one`;
        const answer = await apiCall(stack.apiUrl, 'POST', `/v1/conversations/${uid}/messages`, {
          token: owner,
          body: { text, idempotencyKey: `k-${i}` },
        });
        conversationBytes += 2 * text.length;
        if (answer.body.reply !== `echo: ${text}`) {
          throw new Error(
            `turn ${i} did not answer: ${answer.status} ${JSON.stringify(answer.body).slice(0, 500)}`,
          );
        }
      }
      expect(refused).toBe(0);
      expect(sizes).toHaveLength(TURNS);
      expect(Math.max(...sizes)).toBeLessThanOrEqual(CONTEXT_LIMIT_BYTES);
      // Full long before the end: the requests of the last thousand turns are no larger
      // than those of the thousand before (within 1%: their texts have a digit more).
      const largest = (from: number, to: number): number => Math.max(...sizes.slice(from, to));
      expect(largest(1_000, 2_000)).toBeLessThanOrEqual(largest(0, 1_000) * 1.01);
      // The conversation is many contexts long: without the window the requests would have
      // passed the limit long before the end.
      expect(conversationBytes).toBeGreaterThan(5 * CONTEXT_LIMIT_BYTES);

      const replay = await polychrome(
        [
          'conversation',
          'replay',
          uid,
          '--actor',
          'test:long-admin',
          '--api',
          stack.apiUrl,
          '--json',
        ],
        admin,
      );
      expect(replay.code).toBe(0);
      const report = JSON.parse(replay.stdout) as {
        ok: boolean;
        turns: { ok: boolean; mode: string }[];
      };
      expect(report.ok).toBe(true);
      expect(report.turns).toHaveLength(TURNS);
      expect(report.turns.every((t) => t.ok && t.mode === 'full')).toBe(true);
    });
  }, 900_000);
});
