import { describe, expect, it } from '@jest/globals';
import type { ModelConfigReadyInput } from './model-config-ready';
import { modelConfigReady, secretGrantCommands } from './model-config-ready';

const account = { name: 'polychrome-control-plane', namespace: 'polychrome-system' };
const base = { namespace: 'team-a', name: 'claude', account };
const ref = { name: 'anthropic-key', key: 'api-key' };

describe('modelConfigReady', () => {
  it.each<[string, ModelConfigReadyInput, string, string, RegExp]>([
    ['no secretKeyRef', base, 'True', 'Resolved', /requests carry no API key/],
    [
      'key present',
      { ...base, secretKeyRef: ref, lookup: { kind: 'found', hasKey: true } },
      'True',
      'Resolved',
      /Secret team-a\/anthropic-key, key api-key/,
    ],
    [
      'key absent or empty',
      { ...base, secretKeyRef: ref, lookup: { kind: 'found', hasKey: false } },
      'False',
      'SecretKeyMissing',
      /Secret team-a\/anthropic-key has no key api-key, or it is empty/,
    ],
    [
      'Secret missing',
      { ...base, secretKeyRef: ref, lookup: { kind: 'not_found' } },
      'False',
      'SecretNotFound',
      /Secret team-a\/anthropic-key does not exist/,
    ],
    [
      'Secret forbidden',
      { ...base, secretKeyRef: ref, lookup: { kind: 'forbidden' } },
      'False',
      'SecretForbidden',
      /ServiceAccount polychrome-system\/polychrome-control-plane\) may not get Secret team-a\/anthropic-key/,
    ],
  ])('%s', (_name, input, status, reason, message) => {
    const verdict = modelConfigReady(input);
    expect([verdict.status, verdict.reason]).toEqual([status, reason]);
    expect(verdict.message).toMatch(message);
  });

  it('gives the exact Role and RoleBinding that grant get on the one Secret', () => {
    const verdict = modelConfigReady({
      ...base,
      secretKeyRef: ref,
      lookup: { kind: 'forbidden' },
    });
    const commands =
      'kubectl -n team-a create role polychrome-read-anthropic-key --verb=get --resource=secrets --resource-name=anthropic-key && ' +
      'kubectl -n team-a create rolebinding polychrome-read-anthropic-key --role=polychrome-read-anthropic-key --serviceaccount=polychrome-system:polychrome-control-plane';
    expect(secretGrantCommands('team-a', 'anthropic-key', account)).toBe(commands);
    expect(verdict.message.endsWith(commands)).toBe(true);
  });
});
