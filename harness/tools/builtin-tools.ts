import type { JsonObject } from '../../common/canonical-json';
import type { TurnTool } from '../turn/turn-records';
import type { ToolCallRequest, ToolOutcome, ToolRunner } from '../turn/ports/tool-port';

/**
 * Tools built into the harness. All are pure (deterministic, no I/O, no clock), so the
 * turn loop may run them again after a crash and they never need approval.
 */

/** A built-in tool: its definition and a synchronous, pure implementation. */
export interface BuiltinTool extends TurnTool {
  run(input: JsonObject, request: ToolCallRequest): ToolOutcome;
}

const MAX_EXPRESSION_LENGTH = 1_000;
const MAX_NESTING = 64;

/** Evaluates arithmetic without `eval`: a recursive-descent parser over a closed grammar. */
export const calculatorTool: BuiltinTool = {
  name: 'calculator',
  description:
    'Evaluate an arithmetic expression exactly as written. Supports + - * / % ^ (power), parentheses, unary minus, the constants pi and e, and the functions sqrt, abs, round, floor, ceil, min, max. Returns the number.',
  inputSchema: {
    type: 'object',
    properties: {
      expression: { type: 'string', description: 'For example "(12.5 + 7) * 3 ^ 2".' },
    },
    required: ['expression'],
    additionalProperties: false,
  },
  effect: 'pure',
  needsApproval: false,
  run(input) {
    const expression = input.expression;
    if (typeof expression !== 'string') {
      return error('calculator needs { expression: string }.');
    }
    if (expression.length > MAX_EXPRESSION_LENGTH) {
      return error(`expression is longer than ${MAX_EXPRESSION_LENGTH} characters.`);
    }
    const result = evaluate(expression);
    if (!result.ok) return error(result.message);
    return { content: String(result.value), isError: false };
  },
};

/** Tells the model where it stands in the turn's step budget. */
export const currentStepTool: BuiltinTool = {
  name: 'current_step',
  description:
    'Report which model round trip of this turn is running and how many remain in the step budget, so you can plan how many more tool calls to make.',
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  effect: 'pure',
  needsApproval: false,
  run(_input, request) {
    return {
      content: JSON.stringify({
        step: request.step,
        maxSteps: request.maxSteps,
        stepsLeft: Math.max(0, request.maxSteps - request.step),
      }),
      isError: false,
    };
  },
};

/** Counts what models count badly. */
export const textStatsTool: BuiltinTool = {
  name: 'text_stats',
  description:
    'Count the characters (Unicode code points), words (runs of non-space characters) and lines of a text.',
  inputSchema: {
    type: 'object',
    properties: { text: { type: 'string' } },
    required: ['text'],
    additionalProperties: false,
  },
  effect: 'pure',
  needsApproval: false,
  run(input) {
    const text = input.text;
    if (typeof text !== 'string') return error('text_stats needs { text: string }.');
    return {
      content: JSON.stringify({
        characters: [...text].length,
        words: text.split(/\s+/u).filter((word) => word !== '').length,
        lines: text === '' ? 0 : text.split(/\r\n|\r|\n/u).length,
      }),
      isError: false,
    };
  },
};

/** Every built-in tool, in the order they are offered. */
export const builtinTools: readonly BuiltinTool[] = [
  calculatorTool,
  currentStepTool,
  textStatsTool,
];

/**
 * A {@link ToolRunner} for the built-in tools. It never rejects: each tool is pure and
 * synchronous, so its outcome is always known.
 */
export const builtinToolRunner: ToolRunner = {
  call(request) {
    const tool = builtinTools.find((t) => t.name === request.name);
    if (tool === undefined) {
      return Promise.resolve(error(`${request.name} is not a built-in tool.`));
    }
    return Promise.resolve(tool.run(request.input, request));
  },
};

function error(content: string): ToolOutcome {
  return { content, isError: true };
}

type Evaluated = { ok: true; value: number } | { ok: false; message: string };

const functions: Readonly<Record<string, (args: number[]) => number | string>> = {
  sqrt: (a) => unary('sqrt', a, Math.sqrt),
  abs: (a) => unary('abs', a, Math.abs),
  round: (a) => unary('round', a, Math.round),
  floor: (a) => unary('floor', a, Math.floor),
  ceil: (a) => unary('ceil', a, Math.ceil),
  min: (a) => (a.length === 0 ? 'min needs at least one argument' : Math.min(...a)),
  max: (a) => (a.length === 0 ? 'max needs at least one argument' : Math.max(...a)),
};

const constants: Readonly<Record<string, number>> = { pi: Math.PI, e: Math.E };

function unary(name: string, args: number[], f: (x: number) => number): number | string {
  const [x] = args;
  return args.length === 1 && x !== undefined ? f(x) : `${name} takes exactly one argument`;
}

class ParseError extends Error {}

/**
 * Grammar (lowest precedence first):
 *   sum     = product (("+" | "-") product)*
 *   product = unary (("*" | "/" | "%") unary)*
 *   unary   = ("-" | "+") unary | power
 *   power   = atom ("^" unary)?          right-associative; -2^2 = -4
 *   atom    = number | name | name "(" [sum ("," sum)*] ")" | "(" sum ")"
 */
function evaluate(source: string): Evaluated {
  let pos = 0;
  let depth = 0;

  const skip = (): void => {
    while (pos < source.length && /\s/u.test(source[pos] ?? '')) pos++;
  };
  const peek = (): string => {
    skip();
    return source[pos] ?? '';
  };
  const fail = (message: string): never => {
    throw new ParseError(message);
  };
  const finite = (value: number, what: string): number =>
    Number.isFinite(value) ? value : fail(`${what} is not a finite number`);

  const sum = (): number => {
    let value = product();
    for (let op = peek(); op === '+' || op === '-'; op = peek()) {
      pos++;
      const right = product();
      value = finite(op === '+' ? value + right : value - right, 'the result');
    }
    return value;
  };
  const product = (): number => {
    let value = unaryExpr();
    for (let op = peek(); op === '*' || op === '/' || op === '%'; op = peek()) {
      pos++;
      const right = unaryExpr();
      if ((op === '/' || op === '%') && right === 0) fail('division by zero');
      value = finite(
        op === '*' ? value * right : op === '/' ? value / right : value % right,
        'the result',
      );
    }
    return value;
  };
  const unaryExpr = (): number => {
    const op = peek();
    if (op === '-' || op === '+') {
      pos++;
      const value = nested(unaryExpr);
      return op === '-' ? -value : value;
    }
    return power();
  };
  const power = (): number => {
    const base = atom();
    if (peek() !== '^') return base;
    pos++;
    return finite(base ** nested(unaryExpr), 'the result');
  };
  const atom = (): number => {
    const c = peek();
    if (c === '(') {
      pos++;
      const value = nested(sum);
      if (peek() !== ')') fail(`expected ")" at position ${pos + 1}`);
      pos++;
      return value;
    }
    const number = /^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?/u.exec(source.slice(pos));
    if (number !== null) {
      pos += number[0].length;
      return finite(Number(number[0]), `the number ${number[0]}`);
    }
    const name = /^[a-z]+/u.exec(source.slice(pos));
    if (name === null) {
      return fail(
        c === '' ? 'the expression ends too early' : `unexpected "${c}" at position ${pos + 1}`,
      );
    }
    pos += name[0].length;
    const fn = functions[name[0]];
    if (fn !== undefined) {
      if (peek() !== '(') fail(`${name[0]} needs parentheses`);
      pos++;
      const args: number[] = [];
      if (peek() !== ')') {
        args.push(nested(sum));
        while (peek() === ',') {
          pos++;
          args.push(nested(sum));
        }
      }
      if (peek() !== ')') fail(`expected ")" at position ${pos + 1}`);
      pos++;
      const value = fn(args);
      return typeof value === 'string' ? fail(value) : finite(value, `${name[0]}(...)`);
    }
    const constant = constants[name[0]];
    return constant ?? fail(`unknown name "${name[0]}"`);
  };
  const nested = (parse: () => number): number => {
    if (++depth > MAX_NESTING) fail(`the expression nests deeper than ${MAX_NESTING} levels`);
    try {
      return parse();
    } finally {
      depth--;
    }
  };

  try {
    const value = sum();
    if (peek() !== '') fail(`unexpected "${peek()}" at position ${pos + 1}`);
    // Normalise -0 so "0 * -1" reads as 0.
    return { ok: true, value: value === 0 ? 0 : value };
  } catch (caught) {
    if (caught instanceof ParseError) return { ok: false, message: caught.message };
    throw caught;
  }
}
