import {
  conversationAttributes,
  GenAiOperation,
  type GenAiSpanScope,
} from '../../common/genai-attributes';
import { inSpan, isTracing, SpanKind, SpanStatusCode } from '../../common/tracing';
import type { ToolRunner } from '../turn/ports/tool-port';

/**
 * `runner` with a span around every tool call, after the OpenTelemetry GenAI semantic
 * conventions: `execute_tool <tool name>`, kind INTERNAL, a child of the agent's span
 * (`scope`), with `gen_ai.operation.name`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, the
 * conversation, and for an MCP tool (`<server>/<tool>`) `mcp.method.name` = `tools/call`:
 * the MCP call is recorded on this span, not one of its own, and carries its context to
 * the server (mcp-connection.ts). A tool that reports an error ends the span with status
 * ERROR and `error.type` = `tool_error`; an unknown outcome (the call rejected) records
 * the rejection. Arguments and results are never recorded. With tracing off, `runner`.
 */
export function tracedTools(runner: ToolRunner, scope: GenAiSpanScope): ToolRunner {
  if (!isTracing()) return runner;
  return {
    call: (request, options) => {
      const parent = scope.parent(request.thread);
      return inSpan(
        `${GenAiOperation.ExecuteTool} ${request.name}`,
        {
          kind: SpanKind.INTERNAL,
          ...(parent === undefined ? {} : { parent }),
          attributes: {
            'gen_ai.operation.name': GenAiOperation.ExecuteTool,
            'gen_ai.tool.name': request.name,
            'gen_ai.tool.call.id': request.toolCallId,
            'gen_ai.tool.type': 'function',
            ...conversationAttributes(scope.conversationId),
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
      );
    },
  };
}
