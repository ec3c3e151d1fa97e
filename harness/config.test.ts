import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { ConfigError } from '../common/config';
import { loadHarnessConfig } from './config';

const KEY_HEX = 'ab'.repeat(32);
const TLS = { HARNESS_TLS_CERT_FILE: '/tls/tls.crt', HARNESS_TLS_KEY_FILE: '/tls/tls.key' };
const base = {
  ...TLS,
  HARNESS_NAMESPACE: 'team-a',
  HARNESS_APPROVAL_PUBLIC_KEY: KEY_HEX,
  HARNESS_MODEL_SCRIPT: 'script.yaml',
};

function issues(env: Record<string, string>): string[] {
  try {
    loadHarnessConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.issues.map((i) => `${i.variable}: ${i.message}`);
    throw error;
  }
  throw new Error('config loaded');
}

describe('loadHarnessConfig', () => {
  it('gives the documented defaults', () => {
    expect(loadHarnessConfig({ ...base, POD_IP: '10.0.0.7' })).toEqual({
      host: '10.0.0.7',
      port: 7070,
      healthPort: 9090,
      tls: { certPath: '/tls/tls.crt', keyPath: '/tls/tls.key' },
      namespace: 'team-a',
      approvalPublicKey: new Uint8Array(Buffer.from(KEY_HEX, 'hex')),
      model: { kind: 'scripted', scriptPath: 'script.yaml' },
      maxSteps: 8,
      mcpServers: [],
      requireApproval: [],
      logLevel: 'info',
      shutdownGraceMs: 20_000,
      ackTimeoutMs: 30_000,
      toolTimeoutMs: 60_000,
      recordAgentConfig: true,
    });
  });

  it('records the agent configuration unless HARNESS_RECORD_AGENT_CONFIG opts out', () => {
    expect(loadHarnessConfig(base).recordAgentConfig).toBe(true);
    expect(
      loadHarnessConfig({ ...base, HARNESS_RECORD_AGENT_CONFIG: 'false' }).recordAgentConfig,
    ).toBe(false);
    expect(issues({ ...base, HARNESS_RECORD_AGENT_CONFIG: 'maybe' })).toEqual([
      expect.stringMatching(/^HARNESS_RECORD_AGENT_CONFIG: /u),
    ]);
  });

  it('reads the key from a file and picks Anthropic when a key is set', () => {
    const dir = mkdtempSync(join(tmpdir(), 'harness-config-'));
    writeFileSync(join(dir, 'key'), `${KEY_HEX}\n`);
    const config = loadHarnessConfig({
      ...TLS,
      HARNESS_NAMESPACE: 'team-a',
      HARNESS_APPROVAL_PUBLIC_KEY_FILE: join(dir, 'key'),
      ANTHROPIC_API_KEY: 'sk-test',
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:1234',
      HARNESS_MODEL: 'claude-sonnet-5-5',
      HARNESS_REQUIRE_APPROVAL: 'send_email, everything/*',
      HARNESS_MCP_SERVERS: '[{"transport":"stdio","name":"everything","command":"node"}]',
    });
    expect(config).toMatchObject({
      host: '0.0.0.0',
      approvalPublicKey: new Uint8Array(Buffer.from(KEY_HEX, 'hex')),
      model: {
        kind: 'anthropic',
        apiKey: 'sk-test',
        baseUrl: 'http://127.0.0.1:1234',
        defaultModel: 'claude-sonnet-5-5',
      },
      requireApproval: ['everything/*', 'send_email'],
      mcpServers: [{ transport: 'stdio', name: 'everything', command: 'node' }],
    });
  });

  it('reports every bad variable at once', () => {
    expect(
      issues({
        ...base,
        HARNESS_PORT: 'seventy',
        HARNESS_HEALTH_PORT: '-1',
        HARNESS_APPROVAL_PUBLIC_KEY_FILE: '/nonexistent/key',
        HARNESS_NAMESPACE: 'Team_A',
        HARNESS_MAX_STEPS: '0',
        HARNESS_LOG_LEVEL: 'loud',
        HARNESS_REQUIRE_APPROVAL: '!send_email',
        HARNESS_MCP_SERVERS: '[{"transport":"ftp","name":"x"}]',
      }),
    ).toEqual([
      'HARNESS_PORT: must be a whole number from 0 to 65535, got "seventy"',
      'HARNESS_HEALTH_PORT: must be a whole number from 0 to 65535, got "-1"',
      'HARNESS_APPROVAL_PUBLIC_KEY_FILE: names a file the harness cannot read',
      'HARNESS_NAMESPACE: must be a namespace name (a DNS label); set it from the downward API, metadata.namespace',
      'HARNESS_MAX_STEPS: must be a whole number from 1 to 100, got "0"',
      "HARNESS_MCP_SERVERS: Invalid discriminator value. Expected 'stdio' | 'http' at 0.transport",
      'HARNESS_REQUIRE_APPROVAL: HARNESS_REQUIRE_APPROVAL: "!send_email" is not an approval rule; each entry must be a builtin tool name, <mcpServer>/<tool> or <mcpServer>/*. This list can only add approvals; remove a rule by editing the list itself.',
      'HARNESS_LOG_LEVEL: must be one of debug, info, warn, error, silent, got "loud"',
    ]);
  });

  it('requires the TLS pair and the namespace: there is no plaintext listener', () => {
    const {
      HARNESS_TLS_CERT_FILE: _c,
      HARNESS_TLS_KEY_FILE: _k,
      HARNESS_NAMESPACE: _n,
      ...rest
    } = base;
    expect(issues(rest)).toEqual([
      'HARNESS_TLS_CERT_FILE: is required',
      'HARNESS_TLS_KEY_FILE: is required',
      'HARNESS_NAMESPACE: is required',
    ]);
  });

  it('reads the namespace and, during a key rotation, the next public key; refuses a malformed one', () => {
    const next = 'cd'.repeat(32);
    expect(
      loadHarnessConfig({
        ...base,
        HARNESS_NAMESPACE: 'team-a',
        HARNESS_APPROVAL_NEXT_PUBLIC_KEY: next,
      }),
    ).toMatchObject({
      namespace: 'team-a',
      approvalNextPublicKey: new Uint8Array(Buffer.from(next, 'hex')),
    });
    expect(issues({ ...base, HARNESS_APPROVAL_NEXT_PUBLIC_KEY: 'CD' })).toEqual([
      'HARNESS_APPROVAL_NEXT_PUBLIC_KEY: must be 64 lowercase hex digits (a raw ed25519 public key)',
    ]);
  });

  it('checks the cross-field rules once the fields are valid', () => {
    expect(
      issues({ ...TLS, HARNESS_NAMESPACE: 'team-a', HARNESS_APPROVAL_PUBLIC_KEY: 'abc' }),
    ).toEqual([
      'HARNESS_APPROVAL_PUBLIC_KEY: must be a raw ed25519 public key as 64 hex digits',
      'HARNESS_MODEL_SCRIPT: no model: set ANTHROPIC_API_KEY for the Anthropic provider, OPENAI_API_KEY for an OpenAI-compatible one, or HARNESS_MODEL_SCRIPT to a script file for the scripted provider',
    ]);
  });
});

describe('loadHarnessConfig: which model provider', () => {
  const noScript = { ...TLS, HARNESS_NAMESPACE: 'team-a', HARNESS_APPROVAL_PUBLIC_KEY: KEY_HEX };

  it('picks OpenAI when only OPENAI_API_KEY is set, with its base URL and the model', () => {
    expect(
      loadHarnessConfig({
        ...noScript,
        OPENAI_API_KEY: 'sk-openai',
        OPENAI_BASE_URL: 'http://vllm.models.svc:8000/v1',
        HARNESS_MODEL: 'qwen3-32b',
      }).model,
    ).toEqual({
      kind: 'openai',
      apiKey: 'sk-openai',
      baseUrl: 'http://vllm.models.svc:8000/v1',
      defaultModel: 'qwen3-32b',
    });
  });

  it('picks Anthropic when only ANTHROPIC_API_KEY is set, whatever OPENAI_BASE_URL says', () => {
    expect(
      loadHarnessConfig({
        ...noScript,
        ANTHROPIC_API_KEY: 'sk-ant',
        OPENAI_BASE_URL: 'http://127.0.0.1:1/v1',
      }).model,
    ).toEqual({ kind: 'anthropic', apiKey: 'sk-ant' });
  });

  it('with both keys, HARNESS_MODEL_PROVIDER decides; without it the configuration is refused', () => {
    const both = { ...noScript, ANTHROPIC_API_KEY: 'sk-ant', OPENAI_API_KEY: 'sk-openai' };
    expect(loadHarnessConfig({ ...both, HARNESS_MODEL_PROVIDER: 'openai' }).model).toEqual({
      kind: 'openai',
      apiKey: 'sk-openai',
    });
    expect(loadHarnessConfig({ ...both, HARNESS_MODEL_PROVIDER: 'anthropic' }).model).toEqual({
      kind: 'anthropic',
      apiKey: 'sk-ant',
    });
    expect(issues(both)).toEqual([
      'HARNESS_MODEL_PROVIDER: both ANTHROPIC_API_KEY and OPENAI_API_KEY are set; set HARNESS_MODEL_PROVIDER to anthropic or openai to say which one the harness uses',
    ]);
  });

  it('refuses a provider without its key, an unknown provider and a base URL that is not a URL', () => {
    expect(issues({ ...base, HARNESS_MODEL_PROVIDER: 'openai', ANTHROPIC_API_KEY: 'k' })).toEqual([
      'OPENAI_API_KEY: HARNESS_MODEL_PROVIDER is openai but OPENAI_API_KEY is not set; set the key',
    ]);
    expect(issues({ ...base, HARNESS_MODEL_PROVIDER: 'anthropic' })).toEqual([
      'ANTHROPIC_API_KEY: HARNESS_MODEL_PROVIDER is anthropic but ANTHROPIC_API_KEY is not set; set the key',
    ]);
    expect(
      issues({
        ...base,
        HARNESS_MODEL_PROVIDER: 'gemini',
        OPENAI_API_KEY: 'k',
        OPENAI_BASE_URL: 'vllm:8000',
      }),
    ).toEqual([
      'HARNESS_MODEL_PROVIDER: must be anthropic or openai, got "gemini"',
      'OPENAI_BASE_URL: must be an http or https URL, e.g. http://vllm.models.svc:8000/v1',
    ]);
  });

  it('without a key or a script, says all three ways to get a model', () => {
    expect(issues(noScript)).toEqual([
      'HARNESS_MODEL_SCRIPT: no model: set ANTHROPIC_API_KEY for the Anthropic provider, OPENAI_API_KEY for an OpenAI-compatible one, or HARNESS_MODEL_SCRIPT to a script file for the scripted provider',
    ]);
  });
});
