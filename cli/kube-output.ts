import { Writable } from 'node:stream';

import { UsageError } from './cli-support';

/*
 * kubectl's output flag for the plugin: `-o json|yaml|text` as the commands' `--format`,
 * and the YAML form of what `--format json` prints.
 */

/**
 * kubectl's `-o json|yaml` as the commands' `--format`: `-o yaml` prints what `--format
 * json` prints, one YAML document per JSON line. Everything after `--` is left alone.
 */
export function translateOutput(args: readonly string[]): {
  readonly args: string[];
  readonly yaml: boolean;
} {
  const out: string[] = [];
  let yaml = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg === '--') {
      out.push(...args.slice(i));
      break;
    }
    let value: string | undefined;
    if (arg === '-o' || arg === '--output') {
      value = args[i + 1];
      if (value === undefined) throw new UsageError(`${arg} needs a value: json, yaml or text`);
      i += 1;
    } else if (arg.startsWith('--output=')) {
      value = arg.slice('--output='.length);
    } else if (/^-o[^-]/u.test(arg)) {
      value = arg.slice(2).replace(/^=/u, '');
    }
    if (value === undefined) {
      out.push(arg);
      continue;
    }
    if (value !== 'json' && value !== 'yaml' && value !== 'text') {
      throw new UsageError(`-o must be json, yaml or text, got ${JSON.stringify(value)}`);
    }
    yaml = value === 'yaml';
    out.push('--format', value === 'text' ? 'text' : 'json');
  }
  return { args: out, yaml };
}

/**
 * A stdout that turns each JSON line into a YAML document (`---` between documents). The
 * YAML library is loaded here, for `-o yaml` only.
 */
export async function yamlWriter(out: Writable): Promise<Writable> {
  const { stringify } = await import('yaml');
  let pending = '';
  let documents = 0;
  const convert = (line: string): string => {
    if (line.trim() === '') return '';
    let text: string;
    try {
      text = stringify(JSON.parse(line) as unknown);
    } catch {
      text = `${line}\n`;
    }
    documents += 1;
    return documents === 1 ? text : `---\n${text}`;
  };
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      const text = lines.map(convert).join('');
      if (text === '' || out.write(text)) done();
      else out.once('drain', () => done());
    },
    final(done) {
      const text = convert(pending);
      if (text === '' || out.write(text)) done();
      else out.once('drain', () => done());
    },
  });
}
