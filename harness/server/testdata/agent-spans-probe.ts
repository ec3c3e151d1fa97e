/*
 * Run by harness/server/agent-spans.test.ts as `node --import tsx`: starts tracing as
 * harness/main.ts does, exported as OTLP/HTTP JSON to an endpoint in this process, runs a
 * turn's shape by hand (RunTurn, its first agent, a handoff to a second, which delegates
 * a task to a third on a thread) with the real
 * traced model (a scripted provider) and tool runner (the built-in calculator), and prints
 * one JSON line: every span exported, with its parent.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { JsonObject } from '../../../common/canonical-json';
import type { ModelRequest } from '../../../common/model/model-port';
import { inSpan, SpanKind, startTracing } from '../../../common/tracing';
import { ScriptedProvider } from '../../model/scripted-provider';
import { tracedModel } from '../../model/traced-model';
import { builtinToolRunner } from '../../tools/builtin-tools';
import { tracedTools } from '../../tools/traced-tools';
import type { ToolCallRequest } from '../../turn/ports/tool-port';
import { AgentSpans } from '../agent-spans';

interface OtlpSpan {
  readonly name: string;
  readonly kind: number;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly attributes?: readonly { key: string; value: Record<string, unknown> }[];
}
interface OtlpBody {
  readonly resourceSpans?: readonly {
    readonly scopeSpans?: readonly { readonly spans?: readonly OtlpSpan[] }[];
  }[];
}

async function main(): Promise<void> {
  const bodies: OtlpBody[] = [];
  const sink = createServer((request, response) => {
    let text = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (text += chunk));
    request.on('end', () => {
      bodies.push(JSON.parse(text) as OtlpBody);
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
  process.env.OTEL_EXPORTER_OTLP_PROTOCOL = 'http/json';
  const tracing = await startTracing('probe');

  const provider = ScriptedProvider.parse(
    '{"replies": [{"text": "Handing over."}, {"text": "Found it."}]}',
    'probe',
  );
  const signal = new AbortController().signal;
  const hi: ModelRequest = {
    messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
    tools: [],
    toolChoice: 'auto',
  };
  const call = (name: string, input: JsonObject): ToolCallRequest => ({
    turnId: 't-1',
    toolCallId: `toolu_${name}`,
    name,
    input,
    argsJson: JSON.stringify(input),
    step: 1,
    maxSteps: 4,
  });
  await inSpan('RunTurn', { kind: SpanKind.SERVER }, async () => {
    const agents = new AgentSpans({ conversationId: 'c-1', provider: 'probe', model: 'm-1' });
    const model = tracedModel(provider, '', agents);
    const tools = tracedTools(builtinToolRunner, agents);
    agents.enter(undefined);
    await model.complete(hi, { signal });
    agents.enter('billing');
    await tools.call(call('calculator', { expression: '1 + 1' }), { signal, timeoutMs: 5_000 });
    // billing delegates a task: the researcher's thread, as run-turn reports it.
    agents.enterThread('toolu_delegate', 'researcher', 'm-2');
    await model.complete(hi, { signal });
    agents.closeThread('toolu_delegate');
    await tools.call(call('calculator', { expression: '2 + 2' }), { signal, timeoutMs: 5_000 });
    agents.end();
  });
  await tracing?.shutdown();
  sink.close();

  const spans = bodies
    .flatMap((body) => body.resourceSpans ?? [])
    .flatMap((resource) => resource.scopeSpans ?? [])
    .flatMap((scope) => scope.spans ?? [])
    .map((span) => ({
      name: span.name,
      kind: span.kind,
      spanId: span.spanId,
      parentSpanId: span.parentSpanId ?? '',
      attributes: Object.fromEntries(
        (span.attributes ?? []).map(({ key, value }) => [key, Object.values(value)[0]]),
      ),
    }));
  process.stdout.write(`${JSON.stringify({ spans })}\n`);
}

void main();
