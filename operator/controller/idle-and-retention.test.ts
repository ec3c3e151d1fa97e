import { describe, expect, it } from '@jest/globals';
import { retentionHoldOf } from './idle-and-retention';
import { conversation } from './snapshot-fixtures';

const TRACKING_ID = 'chat:polychrome.dev/Conversation:team/c1';

describe('retentionHoldOf', () => {
  it('names what holds a conversation back from retention, for the status message', () => {
    const hold = (
      spec: Parameters<typeof conversation>[0],
      meta: Parameters<typeof conversation>[2],
    ) => retentionHoldOf(conversation(spec, undefined, meta));
    expect(hold({}, { annotations: { 'argocd.argoproj.io/tracking-id': TRACKING_ID } })).toBe(
      'it is managed by Argo CD (annotation argocd.argoproj.io/tracking-id)',
    );
    expect(hold({}, { labels: { 'app.kubernetes.io/instance': 'chat' } })).toBe(
      'it is managed by Argo CD (label app.kubernetes.io/instance)',
    );
    expect(hold({}, { labels: { 'kustomize.toolkit.fluxcd.io/name': 'apps' } })).toBe(
      'it is managed by Flux (label kustomize.toolkit.fluxcd.io/name)',
    );
    expect(hold({ retention: 'never' }, {})).toBe('spec.retention is never');
    // The tracking annotation's key as a label is not how Argo CD tracks: no hold.
    expect(hold({}, { labels: { 'argocd.argoproj.io/tracking-id': 'x' } })).toBeUndefined();
    expect(hold({ retention: '1h' }, {})).toBeUndefined();
    expect(hold({}, {})).toBeUndefined();
    // A managed conversation with retention never: the manager is named (it is the stronger reason).
    expect(hold({ retention: 'never' }, { labels: { 'app.kubernetes.io/instance': 'chat' } })).toBe(
      'it is managed by Argo CD (label app.kubernetes.io/instance)',
    );
  });
});
