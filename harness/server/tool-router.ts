import type { ToolCallRequest, ToolOutcome, ToolRunner } from '../turn/ports/tool-port';

/**
 * Sends each tool call to the runner that owns the tool's name: built-in tools by their
 * names, MCP tools through the MCP adapter. The turn machine already refuses a tool the
 * turn did not offer; this refuses one the harness cannot run, as a known error outcome
 * (nothing ran, so the turn stays unambiguous).
 */

/** A runner and the tool names it serves. */
export interface ToolRoute {
  readonly names: ReadonlySet<string>;
  readonly runner: ToolRunner;
}

/** Routes by name; `fallback` (when given) takes names no route lists. */
export function createToolRouter(routes: readonly ToolRoute[], fallback?: ToolRunner): ToolRunner {
  return {
    call(request: ToolCallRequest, options): Promise<ToolOutcome> {
      const route = routes.find((r) => r.names.has(request.name));
      const runner = route?.runner ?? fallback;
      if (runner === undefined) {
        return Promise.resolve({
          content: `Tool ${request.name} is offered in this turn but the harness has no runner for it; check the harness's MCP server configuration.`,
          isError: true,
        });
      }
      return runner.call(request, options);
    },
  };
}
