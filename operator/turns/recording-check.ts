import { sha256 } from '@noble/hashes/sha2.js';
import { canonicalJson } from '../../common/canonical-json';
import type { Step } from '../../proto/gen/polychrome/harness/v1/harness';

/**
 * The control plane's checks on what makes a turn replayable (docs/replay.md,
 * "Recording"), before a step the harness sends is committed. The harness is less
 * trusted: a configuration whose digest is not the SHA-256 of its bytes, a model call that
 * names a configuration the journal does not hold, or one without digests from a harness
 * that records them, is refused as forged. Pure.
 */

/** What the check needs to know about the journal. */
export interface RecordingFacts {
  /**
   * Lowercase hex SHA-256 of the newest `agent_config` in the journal (this turn's own,
   * once committed); absent when there is none.
   */
  readonly newestAgentConfig?: string;
}

const encoder = new TextEncoder();

/** Why `step` breaks a recording rule, or `undefined` when it keeps them all. */
export function checkRecording(facts: RecordingFacts, step: Step): string | undefined {
  const content = step.step;
  switch (content?.$case) {
    case 'agentConfig': {
      const { sha256: digest, configJson } = content.value;
      if (digest.length !== 32) {
        return `agent_config of turn ${content.value.turnId} has a digest of ${digest.length} bytes, want 32`;
      }
      if (hex(sha256(encoder.encode(configJson))) !== hex(digest)) {
        return `agent_config of turn ${content.value.turnId} claims digest ${hex(digest)}, which is not the SHA-256 of its config_json`;
      }
      if (!isCanonical(configJson)) {
        return `agent_config of turn ${content.value.turnId} is not canonical JSON, so its digest would not be unique`;
      }
      return undefined;
    }
    case 'modelCall': {
      const call = content.value;
      const named = hex(call.configSha256);
      const newest = facts.newestAgentConfig;
      if (named === '') {
        return newest === undefined
          ? undefined
          : `model_call ${call.step} of turn ${call.turnId} names no agent configuration, but this conversation's harness records them (newest ${newest})`;
      }
      if (named !== newest) {
        return `model_call ${call.step} of turn ${call.turnId} names agent configuration ${named}, but the journal's newest is ${newest ?? '(none)'}`;
      }
      if (call.requestSha256.length !== 32) {
        return `model_call ${call.step} of turn ${call.turnId} has a request digest of ${call.requestSha256.length} bytes, want 32`;
      }
      return undefined;
    }
    case 'toolCall':
    case 'toolResult':
    case 'agentHandoff':
    case undefined:
      return undefined;
  }
}

function isCanonical(json: string): boolean {
  try {
    return canonicalJson(JSON.parse(json)) === json;
  } catch {
    return false;
  }
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}
