import { serveStatelessHttpMcp } from './stateless-http';

/**
 * A small in-process MCP server over streamable HTTP (stateless: one server and
 * transport per request, as the SDK's stateless example does), bound to loopback, for
 * the HTTP failure cases. Tools: `echo` (read-only) and `hang` (never answers; tells the
 * test it started). `kill()` drops every connection and stops listening, as a crashed
 * server would.
 */
export interface TestHttpMcpServer {
  readonly url: string;
  /** Resolves when a `hang` call reached its handler. */
  readonly hangStarted: Promise<void>;
  /** The tools called, in order (what a test that a call never ran reads). */
  readonly calls: readonly string[];
  /** Cuts all connections at once and stops listening. */
  kill(): Promise<void>;
}

/** Starts the server on a free loopback port. */
export async function startTestHttpMcpServer(): Promise<TestHttpMcpServer> {
  let signalHang: () => void = () => undefined;
  const hangStarted = new Promise<void>((resolve) => {
    signalHang = resolve;
  });
  const calls: string[] = [];
  const served = await serveStatelessHttpMcp('polychrome-http-test-server', (mcp) => {
    mcp.registerTool('echo', { description: 'Echo.', annotations: { readOnlyHint: true } }, () => {
      calls.push('echo');
      return { content: [{ type: 'text', text: 'echo over http' }] };
    });
    mcp.registerTool(
      'hang',
      { description: 'Never answers.' },
      () =>
        new Promise(() => {
          calls.push('hang');
          signalHang();
        }),
    );
  });
  return { url: served.url, hangStarted, calls, kill: () => served.kill() };
}
