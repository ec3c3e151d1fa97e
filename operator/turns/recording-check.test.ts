import { describe, expect, it } from '@jest/globals';
import { sha256 } from '@noble/hashes/sha2.js';
import type { Step } from '../../proto/gen/polychrome/harness/v1/harness';
import { checkRecording } from './recording-check';

const CONFIG_JSON = '{"system":"You are a test agent.","version":1}';
const DIGEST = Buffer.from(sha256(new TextEncoder().encode(CONFIG_JSON)));
const NEWEST = DIGEST.toString('hex');

function config(configJson: string, digest: Uint8Array = DIGEST): Step {
  return {
    sequence: 1,
    commitWithResult: false,
    step: {
      $case: 'agentConfig',
      value: { turnId: 't1', sha256: Buffer.from(digest), configJson },
    },
  };
}

function modelCall(configSha256: Uint8Array, requestSha256: Uint8Array): Step {
  return {
    sequence: 2,
    commitWithResult: false,
    step: {
      $case: 'modelCall',
      value: {
        turnId: 't1',
        step: 1,
        model: 'm',
        content: [],
        stopReason: 'end_turn',
        startedAtMs: 0,
        finishedAtMs: 0,
        closing: false,
        configSha256: Buffer.from(configSha256),
        requestSha256: Buffer.from(requestSha256),
        agent: '',
        thread: '',
        depth: 0,
      },
    },
  };
}

const none = new Uint8Array();
const request = new Uint8Array(32).fill(3);

describe('checkRecording (docs/replay.md, "What the control plane checks")', () => {
  it.each([
    ['an honest configuration', config(CONFIG_JSON), {}, undefined],
    [
      'a configuration whose digest is not the SHA-256 of its bytes',
      config(CONFIG_JSON, new Uint8Array(32).fill(1)),
      {},
      'not the SHA-256 of its config_json',
    ],
    [
      'a digest of the wrong length',
      config(CONFIG_JSON, new Uint8Array(31)),
      {},
      'digest of 31 bytes',
    ],
    [
      'a configuration that is not canonical JSON (two texts, one meaning, two digests)',
      config(' {"version":1}', sha256(new TextEncoder().encode(' {"version":1}'))),
      {},
      'not canonical JSON',
    ],
    [
      'a model call naming the newest configuration',
      modelCall(DIGEST, request),
      { newestAgentConfig: NEWEST },
      undefined,
    ],
    [
      'a model call naming a configuration the journal does not hold',
      modelCall(new Uint8Array(32).fill(2), request),
      { newestAgentConfig: NEWEST },
      "but the journal's newest is",
    ],
    [
      'a model call naming a configuration when the journal holds none',
      modelCall(DIGEST, request),
      {},
      'newest is (none)',
    ],
    [
      'a model call without digests from a harness that records them',
      modelCall(none, none),
      { newestAgentConfig: NEWEST },
      'names no agent configuration',
    ],
    [
      'a model call naming its configuration without a request digest',
      modelCall(DIGEST, none),
      { newestAgentConfig: NEWEST },
      'request digest of 0 bytes',
    ],
    [
      'a model call of a harness that never recorded (older journals)',
      modelCall(none, none),
      {},
      undefined,
    ],
  ])('%s', (_name, step, facts, reason) => {
    const verdict = checkRecording(facts, step);
    if (reason === undefined) expect(verdict).toBeUndefined();
    else expect(verdict).toContain(reason);
  });
});
