import { describe, expect, it } from '@jest/globals';
import { z } from 'zod';
import {
  ConfigError,
  envBool,
  envEnum,
  envInt,
  envJson,
  envList,
  envOptionalString,
  envPort,
  envString,
  parseConfig,
} from './config';

const schema = z
  .object({
    NAME: envString(),
    GREETING: envString({ default: 'hello' }),
    NOTE: envOptionalString(),
    PORT: envPort(7070),
    WORKERS: envInt({ default: 2, min: 1, max: 8 }),
    VERBOSE: envBool(false),
    MODE: envEnum(['fast', 'safe'] as const, 'safe'),
    TAGS: envList(),
    SERVERS: envJson(z.array(z.object({ name: z.string() })), []),
  })
  .transform((env) => ({
    name: env.NAME,
    greeting: env.GREETING,
    note: env.NOTE,
    port: env.PORT,
    workers: env.WORKERS,
    verbose: env.VERBOSE,
    mode: env.MODE,
    tags: env.TAGS,
    servers: env.SERVERS,
  }));

describe('parseConfig', () => {
  it('applies defaults and parses every kind of field', () => {
    const config = parseConfig('test', schema, {
      NAME: ' svc ',
      NOTE: '',
      WORKERS: '4',
      VERBOSE: 'yes',
      MODE: 'fast',
      TAGS: 'a, b,,c',
      SERVERS: '[{"name":"x"}]',
    });
    expect(config).toEqual({
      name: 'svc',
      greeting: 'hello',
      note: undefined,
      port: 7070,
      workers: 4,
      verbose: true,
      mode: 'fast',
      tags: ['a', 'b', 'c'],
      servers: [{ name: 'x' }],
    });
  });

  it('freezes the result all the way down', () => {
    const config = parseConfig('test', schema, { NAME: 'svc', SERVERS: '[{"name":"x"}]' });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.servers)).toBe(true);
    expect(Object.isFrozen(config.servers[0])).toBe(true);
  });

  it('reports every bad field at once, each under its variable name', () => {
    let caught: unknown;
    try {
      parseConfig('test', schema, {
        PORT: '70000',
        WORKERS: 'many',
        VERBOSE: 'perhaps',
        MODE: 'reckless',
        SERVERS: '[{"name":3}]',
      });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    if (!(caught instanceof ConfigError)) return;
    expect(caught.code).toBe('invalid_argument');
    expect(caught.issues.map((issue) => issue.variable)).toEqual([
      'NAME',
      'PORT',
      'WORKERS',
      'VERBOSE',
      'MODE',
      'SERVERS',
    ]);
    expect(caught.message).toBe(
      [
        'test configuration has 6 problems; fix them and restart:',
        '  - NAME: is required',
        '  - PORT: must be a whole number from 0 to 65535, got "70000"',
        '  - WORKERS: must be a whole number from 1 to 8, got "many"',
        '  - VERBOSE: must be true or false, got "perhaps"',
        '  - MODE: must be one of fast, safe, got "reckless"',
        '  - SERVERS: Invalid input: expected string, received number at 0.name',
      ].join('\n'),
    );
  });

  it('says "problem" for one and reports JSON that does not parse', () => {
    expect(() => parseConfig('svc', schema, { NAME: 'n', SERVERS: '{' })).toThrow(
      'svc configuration has 1 problem; fix it and restart:\n  - SERVERS: is not valid JSON',
    );
  });

  it('reads process.env when given no environment', () => {
    const key = 'POLYCHROME_CONFIG_TEST_NAME';
    process.env[key] = 'from-process';
    try {
      expect(parseConfig('test', z.object({ [key]: envString() }))).toEqual({
        [key]: 'from-process',
      });
    } finally {
      delete process.env[key];
    }
  });
});
