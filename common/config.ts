import { z } from 'zod';
import { AppError } from './errors';

/**
 * Configuration from the environment (STYLE.md §6). This is the only module that reads
 * `process.env`, and only as the default of a parameter, so tests pass their own
 * environment. Each plane's config module declares a zod schema over environment variable
 * names with the `env*` helpers below and calls {@link parseConfig}; the process exits
 * non-zero on the {@link ConfigError} before it serves anything.
 */

/** An environment: variable name to value. */
export type Env = Readonly<Record<string, string | undefined>>;

/** One bad field: the environment variable and what is wrong with it. */
export interface ConfigIssue {
  readonly variable: string;
  readonly message: string;
}

/** A configuration that does not fit its schema; `issues` lists every bad field. */
export class ConfigError extends AppError {
  override readonly name: string = 'ConfigError';
  readonly issues: readonly ConfigIssue[];

  constructor(component: string, issues: readonly ConfigIssue[]) {
    const lines = issues.map((issue) => `  - ${issue.variable}: ${issue.message}`).join('\n');
    super(
      'invalid_argument',
      `${component} configuration has ${issues.length} problem${issues.length === 1 ? '' : 's'}; fix ${issues.length === 1 ? 'it' : 'them'} and restart:\n${lines}`,
      { details: { component, problems: issues.length } },
    );
    this.issues = issues;
  }
}

/**
 * Parses `env` with `schema` into an object frozen all the way down (nested objects too).
 *
 * Every field is checked before anything is reported, so one start shows all the mistakes.
 * Checks that span several fields (an object-level refinement) run only once each field is
 * valid on its own; that is how zod orders them.
 *
 * @param component names the process in the message (`harness`, `control plane`).
 * @param env @default process.env
 * @throws ConfigError (`invalid_argument`) listing every bad field.
 */
export function parseConfig<S extends z.ZodType>(
  component: string,
  schema: S,
  env: Env = process.env,
): Readonly<z.output<S>> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      component,
      parsed.error.issues.map((issue) => ({
        variable: issue.path.length === 0 ? '(environment)' : issue.path.map(String).join('.'),
        message: issue.message,
      })),
    );
  }
  for (const child of Object.values(parsed.data ?? {})) freezeDeep(child);
  return Object.freeze(parsed.data);
}

function freezeDeep(value: unknown): void {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return;
  // Typed arrays (key bytes) cannot be frozen; they are left as they are.
  if (ArrayBuffer.isView(value)) return;
  for (const child of Object.values(value)) freezeDeep(child);
  Object.freeze(value);
}

function isUnset(raw: string | undefined): raw is undefined {
  return raw === undefined || raw.trim() === '';
}

/** A string variable; empty counts as unset. Without a default it is required. */
export function envString(options: { default?: string } = {}) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): string => {
      if (!isUnset(raw)) return raw.trim();
      if (options.default !== undefined) return options.default;
      ctx.addIssue({ code: 'custom', message: 'is required' });
      return z.NEVER;
    });
}

/** An optional string variable; empty counts as unset. */
export function envOptionalString() {
  return z
    .string()
    .optional()
    .transform((raw): string | undefined => (isUnset(raw) ? undefined : raw.trim()));
}

/** A whole number in `[min, max]`; unset gives `default`. */
export function envInt(options: { default: number; min?: number; max?: number }) {
  const min = options.min ?? 0;
  const max = options.max ?? Number.MAX_SAFE_INTEGER;
  return z
    .string()
    .optional()
    .transform((raw, ctx): number => {
      if (isUnset(raw)) return options.default;
      const value = Number(raw.trim());
      if (!/^-?\d+$/u.test(raw.trim()) || value < min || value > max) {
        ctx.addIssue({
          code: 'custom',
          message: `must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}`,
        });
        return z.NEVER;
      }
      return value;
    });
}

/** A TCP port (1-65535, or 0 to let the system pick, for tests); unset gives `fallback`. */
export function envPort(fallback: number) {
  return envInt({ default: fallback, min: 0, max: 65_535 });
}

/** `true`/`false` (also `1`/`0`, `yes`/`no`); unset gives `fallback`. */
export function envBool(fallback: boolean) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): boolean => {
      if (isUnset(raw)) return fallback;
      const value = raw.trim().toLowerCase();
      if (['true', '1', 'yes'].includes(value)) return true;
      if (['false', '0', 'no'].includes(value)) return false;
      ctx.addIssue({
        code: 'custom',
        message: `must be true or false, got ${JSON.stringify(raw)}`,
      });
      return z.NEVER;
    });
}

/** A comma-separated list; blanks are dropped; unset gives `[]`. */
export function envList() {
  return z
    .string()
    .optional()
    .transform((raw): string[] =>
      isUnset(raw)
        ? []
        : raw
            .split(',')
            .map((item) => item.trim())
            .filter((item) => item !== ''),
    );
}

/** One of `values`; unset gives `fallback`. */
export function envEnum<const V extends readonly [string, ...string[]]>(
  values: V,
  fallback: V[number],
) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): V[number] => {
      if (isUnset(raw)) return fallback;
      const value = raw.trim();
      const found = values.find((v) => v === value);
      if (found === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `must be one of ${values.join(', ')}, got ${JSON.stringify(raw)}`,
        });
        return z.NEVER;
      }
      return found;
    });
}

/** JSON text that fits `schema`; unset gives `fallback`. Nested mistakes name their path. */
export function envJson<S extends z.ZodType>(schema: S, fallback: z.output<S>) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): z.output<S> => {
      if (isUnset(raw)) return fallback;
      let value: unknown;
      try {
        value = JSON.parse(raw);
      } catch {
        ctx.addIssue({ code: 'custom', message: 'is not valid JSON' });
        return z.NEVER;
      }
      const parsed = schema.safeParse(value);
      if (parsed.success) return parsed.data;
      for (const issue of parsed.error.issues) {
        const at = issue.path.length === 0 ? '' : ` at ${issue.path.map(String).join('.')}`;
        ctx.addIssue({ code: 'custom', message: `${issue.message}${at}` });
      }
      return z.NEVER;
    });
}
