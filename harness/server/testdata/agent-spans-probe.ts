/*
 * Run by harness/server/agent-spans.test.ts as `node --import tsx`: starts tracing as
 * harness/main.ts does, exported as OTLP/HTTP JSON to an endpoint in this process, runs a
 * turn's shape by hand (RunTurn, its first agent, a handoff to a second, which asks a
 * panel of two on threads side by side) with the real
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
    '{"replies": [{"text": "Handing over."}, {"text": "Doubtful."}, {"text": "Found it."}, {"text": "Still doubtful."}]}',
    'probe',
  );
  const signal = new AbortController().signal;
  const hi: ModelRequest = {
    messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
    tools: [],
    toolChoice: 'auto',
  };
  const call = (name: string, input: JsonObject, thread?: string): ToolCallRequest => ({
    turnId: 't-1',
    toolCallId: `toolu_${name}`,
    name,
    input,
    argsJson: JSON.stringify(input),
    step: 1,
    maxSteps: 4,
    ...(thread === undefined ? {} : { thread }),
  });
  await inSpan('RunTurn', { kind: SpanKind.SERVER }, async () => {
    const agents = new AgentSpans({ conversationId: 'c-1', provider: 'probe', model: 'm-1' });
    const model = tracedModel(provider, '', agents);
    const tools = tracedTools(builtinToolRunner, agents);
    agents.enter(undefined);
    await model.complete(hi, { signal });
    agents.enter('billing');
    await tools.call(call('calculator', { expression: '1 + 1' }), { signal, timeoutMs: 5_000 });
    // billing asks a panel: the researcher's and the skeptic's threads, side by side, as
    // run-turn reports them; their calls interleave.
    agents.enterThread('toolu_d1', 'researcher', 'm-2', '');
    agents.enterThread('toolu_d2', 'skeptic', 'm-2', '');
    await model.complete(hi, { signal, thread: 'toolu_d2' });
    await model.complete(hi, { signal, thread: 'toolu_d1' });
    await tools.call(call('calculator', { expression: '3 + 3' }, 'toolu_d1'), {
      signal,
      timeoutMs: 5_000,
    });
    agents.closeThread('toolu_d1');
    // The skeptic's thread is still open after the researcher's closed.
    await model.complete(hi, { signal, thread: 'toolu_d2' });
    agents.closeThread('toolu_d2');
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
