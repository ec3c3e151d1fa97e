import { FETCH_TOOL } from '../../common/payment-approval';
import type { TurnTool } from '../turn/turn-records';
import type {
  PaymentRequired,
  ToolCallOptions,
  ToolCallRequest,
  ToolOutcome,
  ToolRunner,
} from '../turn/ports/tool-port';

/**
 * The built-in `fetch` tool: an HTTP GET from the sandbox, within its network policy. A GET
 * changes nothing, so the tool is `pure` and runs again after a crash. A 402 Payment
 * Required is not the tool's result: its headers go back to the turn as `paymentRequired`,
 * and the control plane, which alone holds a wallet, reads the challenge and pays only
 * after a person approved the charge (docs/payments.md, "A paid call in a turn").
 */

/** The most of a response body the model is given. */
export const FETCH_MAX_BODY_BYTES = 64 * 1024;

/** The tool as the turn offers it. */
export const fetchTool: TurnTool = {
  name: FETCH_TOOL,
  description:
    'HTTP GET a URL (http or https) and return its status and body as text (the first 64 KiB). A resource that asks for payment (402) is paid only after a person approves the exact charge; you get the paid response, or a result saying why nothing was paid.',
  inputSchema: {
    type: 'object',
    properties: {
      url: { type: 'string', description: 'An absolute http:// or https:// URL.' },
    },
    required: ['url'],
    additionalProperties: false,
  },
  effect: 'pure',
  needsApproval: false,
};

/** Runs `fetch` with the platform's HTTP client (undici). */
export const fetchToolRunner: ToolRunner = {
  async call(request: ToolCallRequest, options: ToolCallOptions): Promise<ToolOutcome> {
    const url = targetOf(request.input.url);
    if (typeof url === 'string') return { content: url, isError: true };
    let response: Response;
    try {
      response = await fetch(url, { signal: options.signal, redirect: 'manual' });
    } catch (error) {
      // Nothing was sent or nothing came back: a GET has no effect to lose, so say so.
      if (options.signal.aborted) throw error;
      return { content: `fetch ${url.href} failed: ${causeOf(error)}`, isError: true };
    }
    const body = await readCapped(response, FETCH_MAX_BODY_BYTES);
    if (response.status === 402) {
      const paymentRequired: PaymentRequired = {
        url: url.href,
        headers: [...response.headers.entries()].map(([name, value]) => [
          name.toLowerCase(),
          value,
        ]),
      };
      return { content: body, isError: true, paymentRequired };
    }
    const location = response.headers.get('location');
    const content = `HTTP ${response.status}${location === null ? '' : ` (location: ${location})`}\n${body}`;
    return { content, isError: response.status >= 400 };
  },
};

/** The URL to GET, or what is wrong with the argument. */
function targetOf(value: unknown): URL | string {
  if (typeof value !== 'string' || value === '') {
    return 'fetch needs arguments of the form { url: string } with an absolute http(s) URL.';
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `fetch: "${value.slice(0, 200)}" is not an absolute URL; give one such as https://example.com/path.`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return `fetch: ${url.protocol} URLs are not fetched; give an http:// or https:// URL.`;
  }
  if (url.username !== '' || url.password !== '') {
    return 'fetch: a URL with credentials in it is not fetched; remove the user and password.';
  }
  return url;
}

/** The body as UTF-8 text, cut at `max` bytes with a note; the rest is not read. */
async function readCapped(response: Response, max: number): Promise<string> {
  const reader: ReadableStreamDefaultReader<Uint8Array> | undefined = response.body?.getReader();
  if (reader === undefined) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  let cut = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
    if (size > max) {
      cut = true;
      await reader.cancel();
      break;
    }
  }
  const text = Buffer.concat(chunks).subarray(0, max).toString('utf8');
  return cut ? `${text}\n[cut at ${max} bytes]` : text;
}

function causeOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
}
