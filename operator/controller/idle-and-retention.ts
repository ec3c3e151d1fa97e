/**
 * What `spec.idleTimeout` and `spec.retention` mean for one Conversation (pure): the
 * durations read, why one cannot be used, and what holds a conversation back from
 * retention (GitOps tracking, `retention: never`). `plan.ts` acts on them and
 * `conversation-conditions.ts` reports them.
 */
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { DEFAULT_RETENTION, RETENTION_NEVER } from '../api/v1alpha1/conversation-values';
import { parseDuration } from './duration';
import { formatTime, parseTime } from './wire-time';

/** A duration field as the plan read it. */
export interface DurationRule {
  /** The text read (after defaulting), when there is one. */
  readonly value?: string;
  readonly ms?: number;
  /** Why the value cannot be used; the rule it drives is then disabled. */
  readonly error?: string;
  /** RFC 3339 time the rule fires, when it is armed. */
  readonly deadline?: string;
}

/**
 * Metadata by which a GitOps tool marks an object it applies from Git and would recreate if
 * it were deleted. Argo CD tracks by the annotation (its default since 3.0, and with
 * `annotation+label`) or by the label (the `label` method, the default before 3.0; its
 * documentation recommends the key `argocd.argoproj.io/instance` when
 * `application.instanceLabelKey` is changed). Flux's kustomize and helm controllers label
 * what they apply.
 */
export const GITOPS_TRACKING = [
  { tool: 'Argo CD', on: 'annotation', key: 'argocd.argoproj.io/tracking-id' },
  { tool: 'Argo CD', on: 'label', key: 'app.kubernetes.io/instance' },
  { tool: 'Argo CD', on: 'label', key: 'argocd.argoproj.io/instance' },
  { tool: 'Flux', on: 'label', key: 'kustomize.toolkit.fluxcd.io/name' },
  { tool: 'Flux', on: 'label', key: 'helm.toolkit.fluxcd.io/name' },
] as const;

/**
 * Why retention must never delete this Conversation, for people (`spec.retention is never`,
 * `it is managed by Argo CD (annotation argocd.argoproj.io/tracking-id)`), or undefined when
 * it may. A tracking key counts whatever its value: keeping an object is always safe,
 * deleting one Git declares is not.
 */
export function retentionHoldOf(conversation: Conversation): string | undefined {
  const { labels = {}, annotations = {} } = conversation.metadata;
  for (const marker of GITOPS_TRACKING) {
    const found = marker.on === 'annotation' ? annotations : labels;
    if (Object.hasOwn(found, marker.key)) {
      return `it is managed by ${marker.tool} (${marker.on} ${marker.key})`;
    }
  }
  if (conversation.spec.retention === RETENTION_NEVER)
    return `spec.retention is ${RETENTION_NEVER}`;
  return undefined;
}

/** `spec.idleTimeout` as the plan reads it (the deadline counts from `status.lastTurnTime`). */
export function readIdle(conversation: Conversation): DurationRule {
  const value = conversation.spec.idleTimeout;
  if (value === undefined) return {};
  const parsed = parseDuration(value);
  if (!parsed.ok) return { value, error: parsed.error };
  const lastTurnMs = parseTime(conversation.status?.lastTurnTime);
  if (parsed.ms === 0 || lastTurnMs === undefined) return { value, ms: parsed.ms };
  return { value, ms: parsed.ms, deadline: formatTime(lastTurnMs + parsed.ms) };
}

/** `spec.retention` as the plan reads it (defaulted; `never` has no duration). */
export function readRetention(conversation: Conversation): DurationRule {
  const value = conversation.spec.retention ?? DEFAULT_RETENTION;
  if (value === RETENTION_NEVER) return { value };
  const parsed = parseDuration(value);
  return parsed.ok ? { value, ms: parsed.ms } : { value, error: parsed.error };
}
