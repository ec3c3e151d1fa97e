import type { IncomingMessage } from 'node:http';
import { ApiError } from './api-error';

/** Largest request body read, in bytes. @default 65536 (64 KiB) */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;

/**
 * How much of a refused body is read and thrown away so the client can read the answer.
 * Closing a socket with unread input makes the kernel reset the connection, and the client
 * may lose the answer; past this many bytes the socket is closed anyway.
 */
const DISCARD_LIMIT_BYTES = 1024 * 1024;

/** True for `application/json`, with any parameters; a charset, if named, must be UTF-8. */
export function isJsonContentType(header: string | undefined): boolean {
  if (header === undefined) return false;
  const [type = '', ...parameters] = header.split(';').map((part) => part.trim().toLowerCase());
  if (type !== 'application/json') return false;
  return parameters.every((p) => !p.startsWith('charset=') || /^charset="?utf-8"?$/u.test(p));
}

/** The methods that carry no body a handler reads; every other one must declare JSON. */
const BODYLESS_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD']);

/**
 * Why a request is refused for its content type, or undefined. Every method but GET and
 * HEAD (so every POST and DELETE, with a body or without) must send `Content-Type:
 * application/json` ({@link isJsonContentType}). A browser sends that type to another site
 * only after a CORS preflight, which no listener grants, while a form post or a `no-cors`
 * fetch sends `text/plain`, a form type or none: so requiring it keeps a web page the
 * user visits from acting with the user's credentials (a session cookie, a `kubectl proxy`
 * on loopback). The server asks this before anything else: before authentication,
 * forwarding, or reading the body.
 *
 * @param kubectlHint name kubectl's raw verbs in the message (the Kubernetes door, where
 *   `kubectl create --raw` and `delete --raw` send no Content-Type).
 * @returns ApiError 415 `invalid_argument` naming the type received and the one to send.
 */
export function contentTypeRefusal(
  method: string,
  contentType: string | undefined,
  kubectlHint = false,
): ApiError | undefined {
  if (BODYLESS_METHODS.has(method) || isJsonContentType(contentType)) return undefined;
  const got = contentType === undefined ? 'none' : JSON.stringify(contentType.slice(0, 100));
  return new ApiError(
    'invalid_argument',
    `a ${method.slice(0, 20)} request must send "Content-Type: application/json" (a charset, if ` +
      `any, UTF-8), even with no body, and this one sent ${got}; send that header` +
      (kubectlHint
        ? ' (kubectl create --raw and kubectl delete --raw send none: use kubectl polychrome, ' +
          "or curl through kubectl proxy with -H 'Content-Type: application/json'; docs/kube-api.md)"
        : ''),
    { httpStatus: 415, details: { field: 'Content-Type' } },
  );
}

/** True when the request declares an empty body (`Content-Length: 0`, or no body at all). */
export function hasNoBody(request: IncomingMessage): boolean {
  return (
    request.headers['content-length'] === '0' ||
    (request.headers['content-length'] === undefined &&
      request.headers['transfer-encoding'] === undefined)
  );
}

/**
 * Reads and drops whatever is left of the request body, so that an answer sent before the
 * body was read reaches the client; closes the connection once more than
 * {@link DISCARD_LIMIT_BYTES} have been dropped. Safe to call more than once.
 */
export function discardBody(request: IncomingMessage): void {
  if (request.readableEnded || request.listenerCount('data') > 0) return;
  let dropped = 0;
  request.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > DISCARD_LIMIT_BYTES) request.socket.destroy();
  });
  request.on('error', () => undefined);
  request.resume();
}

/**
 * Reads the body as JSON, counting bytes as they arrive so no more than `maxBytes` is ever
 * held. The caller checked the content type ({@link contentTypeRefusal}).
 *
 * @returns the parsed value (any JSON value: the caller checks its shape).
 * @throws ApiError 413 `resource_exhausted` when the body (declared or read) is longer than
 *   `maxBytes` (the rest is discarded, {@link discardBody}); 400 `invalid_argument` for an
 *   empty body, bytes that are not UTF-8, or JSON that does not parse (naming the position
 *   when the parser gives one).
 */
export async function readJsonBody(request: IncomingMessage, maxBytes: number): Promise<unknown> {
  const declared = request.headers['content-length'];
  if (declared !== undefined && Number(declared) > maxBytes) {
    discardBody(request);
    throw tooLarge(maxBytes, Number(declared));
  }
  const bytes = await collect(request, maxBytes);
  if (bytes.length === 0) {
    throw new ApiError('invalid_argument', 'the request body is empty; send a JSON object', {
      details: { field: 'body' },
    });
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new ApiError('invalid_argument', 'the request body is not valid UTF-8; send UTF-8 JSON', {
      details: { field: 'body' },
    });
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw malformed(error, text);
  }
}

function tooLarge(maxBytes: number, size?: number): ApiError {
  return new ApiError(
    'resource_exhausted',
    `the request body is larger than ${String(maxBytes)} bytes; send a shorter message`,
    {
      httpStatus: 413,
      details: size === undefined ? { maxBytes } : { maxBytes, size },
    },
  );
}

function collect(request: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      request.off('data', onData);
      request.off('end', onEnd);
      request.off('error', onError);
      request.off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBytes) {
        cleanup();
        chunks.length = 0;
        discardBody(request);
        reject(tooLarge(maxBytes));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(
        new ApiError('cancelled', 'the request body was not received completely; send it again', {
          cause: error,
        }),
      );
    };
    const onClose = (): void => {
      if (request.complete) return;
      onError(new Error('connection closed while reading the body'));
    };
    request.on('data', onData);
    request.on('end', onEnd);
    request.on('error', onError);
    request.on('close', onClose);
  });
}

const POSITION = /at position (\d+)/u;

function malformed(error: unknown, text: string): ApiError {
  const reason = error instanceof Error ? error.message : '';
  const match = POSITION.exec(reason);
  if (match?.[1] !== undefined) {
    const position = Number(match[1]);
    const before = text.slice(0, position);
    const line = before.split('\n').length;
    const column = position - before.lastIndexOf('\n');
    return new ApiError(
      'invalid_argument',
      `the request body is not valid JSON: error at position ${String(position)} ` +
        `(line ${String(line)}, column ${String(column)}); send a JSON object`,
      { details: { field: 'body', position, line, column } },
    );
  }
  const ending = reason.startsWith('Unexpected end');
  return new ApiError(
    'invalid_argument',
    ending
      ? 'the request body is not valid JSON: it ends before the value is complete; send a JSON object'
      : 'the request body is not valid JSON; send a JSON object',
    { details: { field: 'body' } },
  );
}
