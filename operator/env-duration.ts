/* The control plane's duration settings: `90m`, `24h` (one whole number and a unit). */
import { z } from 'zod';

export const DAY_MS = 24 * 60 * 60 * 1000;

const DURATION_UNITS_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: DAY_MS,
};

/** A duration such as `90m` or `24h` (one whole number and a unit), in milliseconds. */
export function envDuration(fallbackMs: number, range: { min: number; max: number }) {
  return z
    .string()
    .optional()
    .transform((raw, ctx): number => {
      if (raw === undefined || raw.trim() === '') return fallbackMs;
      const match = /^(\d{1,12})(ms|s|m|h|d)$/u.exec(raw.trim());
      const ms =
        match === null ? Number.NaN : Number(match[1]) * (DURATION_UNITS_MS[match[2] ?? ''] ?? 0);
      if (!(ms >= range.min && ms <= range.max)) {
        ctx.addIssue({
          code: 'custom',
          message: `must be a duration from 1s to 30d, a whole number and a unit (ms, s, m, h or d) such as 90m or 24h, got ${JSON.stringify(raw)}`,
        });
        return z.NEVER;
      }
      return ms;
    });
}
