import { describe, expect, it } from '@jest/globals';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../common/config';
import { AppError } from '../common/errors';
import { DEFAULT_ANTHROPIC_MODEL } from '../common/model/anthropic-provider';
import { loadSummaryConfig, summaryModelClient } from './summary-config';

const quiet = { error: () => {}, warn: () => {}, info: () => {}, debug: () => {} };

describe('loadSummaryConfig', () => {
  it('is off without a key file, whatever else is set', () => {
    expect(loadSummaryConfig({})).toBeUndefined();
    expect(loadSummaryConfig({ POLYCHROME_SUMMARY_MODEL: 'm' })).toBeUndefined();
  });

  it('takes the defaults, and the gateway and model given', () => {
    expect(loadSummaryConfig({ POLYCHROME_SUMMARY_API_KEY_FILE: '/k' })).toEqual({
      apiKeyPath: '/k',
      baseUrl: 'https://api.anthropic.com',
      model: DEFAULT_ANTHROPIC_MODEL,
      maxTokens: 1024,
    });
    expect(
      loadSummaryConfig({
        POLYCHROME_SUMMARY_API_KEY_FILE: '/k',
        POLYCHROME_SUMMARY_BASE_URL: 'https://gateway.example/anthropic',
        POLYCHROME_SUMMARY_MODEL: 'claude-x',
        POLYCHROME_SUMMARY_MAX_TOKENS: '512',
      }),
    ).toMatchObject({
      baseUrl: 'https://gateway.example/anthropic',
      model: 'claude-x',
      maxTokens: 512,
    });
  });

  it('names each bad variable', () => {
    let error: unknown;
    try {
      loadSummaryConfig({
        POLYCHROME_SUMMARY_API_KEY_FILE: '/k',
        POLYCHROME_SUMMARY_BASE_URL: 'not a url',
        POLYCHROME_SUMMARY_MAX_TOKENS: '10',
      });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(String((error as Error).message)).toContain('POLYCHROME_SUMMARY_BASE_URL');
    expect(String((error as Error).message)).toContain('POLYCHROME_SUMMARY_MAX_TOKENS');
  });
});

describe('summaryModelClient', () => {
  it('reads the key from its file; a missing or empty file is an error naming the variable, without the key', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'summary-key-'));
    try {
      const config = {
        apiKeyPath: join(dir, 'key'),
        baseUrl: 'http://127.0.0.1:9',
        model: 'claude-x',
        maxTokens: 300,
      };
      await expect(summaryModelClient(config, quiet)).rejects.toThrow(
        /POLYCHROME_SUMMARY_API_KEY_FILE: cannot read/u,
      );
      await writeFile(config.apiKeyPath, '  \n');
      await expect(summaryModelClient(config, quiet)).rejects.toThrow(AppError);
      await writeFile(config.apiKeyPath, 'sk-secret\n');
      const client = await summaryModelClient(config, quiet);
      expect(client.settings).toEqual({ model: 'claude-x', maxTokens: 300 });
      expect(client.provider.parameters).toEqual({ model: 'claude-x', maxTokens: 300 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
