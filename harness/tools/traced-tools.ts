import { inSpan, isTracing, SpanKind, SpanStatusCode } from '../../common/tracing';
import type { ToolRunner } from '../turn/ports/tool-port';

/**
 * `runner` with a span around every tool call, after the OpenTelemetry GenAI semantic
 * conventions: `execute_tool <tool name>`, kind INTERNAL, `gen_ai.operation.name`,
 * `gen_ai.tool.name`, `gen_ai.tool.call.id`, and for an MCP tool (`<server>/<tool>`)
 * `mcp.method.name` = `tools/call`. A tool that reports an error ends the span with status
 * ERROR and `error.type` = `tool_error`; an unknown outcome (the call rejected) records the
 * rejection. Arguments and results are never recorded. With tracing off, `runner` itself.
 */
export function tracedTools(runner: ToolRunner): ToolRunner {
  if (!isTracing()) return runner;
  return {
    call: (request, options) =>
      inSpan(
        `execute_tool ${request.name}`,
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            'gen_ai.operation.name': 'execute_tool',
            'gen_ai.tool.name': request.name,
            'gen_ai.tool.call.id': request.toolCallId,
            'gen_ai.tool.type': 'function',
            ...(request.name.includes('/') ? { 'mcp.method.name': 'tools/call' } : {}),
          },
        },
        async (span) => {
          const outcome = await runner.call(request, options);
          if (outcome.isError) {
            span?.setStatus({ code: SpanStatusCode.ERROR, message: 'the tool reported an error' });
            span?.setAttribute('error.type', 'tool_error');
          }
          return outcome;
        },
      ),
  };
}
