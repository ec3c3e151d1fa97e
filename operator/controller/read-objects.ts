/**
 * Narrowing of objects read from the API server (raw JSON, `unknown`) into the shapes
 * the reconciler observes. Pure and tested: every function takes `unknown` and returns a
 * typed value or undefined, never a cast of unchecked data.
 */
import type { Conversation } from '../api/v1alpha1/conversation-types';
import { ConversationResource } from '../api/v1alpha1/conversation-types';
import { checkAgainstSchema, isPlainObject } from '../api/v1alpha1/schema-check';
import { conversationSchema } from '../api/v1alpha1/conversation-crd';
import { SANDBOX_POD_NAME_ANNOTATION } from './child-meta';
import type { ClaimEnvVar } from './agent-sandbox-api';
import type { ContainerManifest, PodSpecManifest } from './desired-pod';
import type {
  ObservedClaim,
  ObservedCondition,
  ObservedOwner,
  ObservedPod,
  ObservedSandbox,
  ObservedSandboxTemplate,
} from './snapshot';

/** The value at `path` inside `obj`, or undefined when a step is missing. */
export function fieldAt(obj: unknown, ...path: string[]): unknown {
  let cur: unknown = obj;
  for (const key of path) {
    if (!isPlainObject(cur)) return undefined;
    cur = cur[key];
  }
  return cur;
}

function stringAt(obj: unknown, ...path: string[]): string | undefined {
  const value = fieldAt(obj, ...path);
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function stringMapAt(obj: unknown, ...path: string[]): Record<string, string> {
  const value = fieldAt(obj, ...path);
  const out: Record<string, string> = {};
  if (!isPlainObject(value)) return out;
  for (const [k, v] of Object.entries(value)) if (typeof v === 'string') out[k] = v;
  return out;
}

function arrayAt(obj: unknown, ...path: string[]): readonly unknown[] {
  const value = fieldAt(obj, ...path);
  return Array.isArray(value) ? value : [];
}

// Fields whose pattern the reconciler re-checks itself (and reports), so an object stored
// before the schema validated them is still reconciled.
const LENIENT_FIELDS = ['.spec.retention:', '.spec.idleTimeout:'];

/**
 * A Conversation the reconciler can work on: right apiVersion and kind, metadata with a
 * name, namespace and uid, and a spec and status that pass the CRD's OpenAPI checks,
 * except that `spec.retention` and `spec.idleTimeout` may break their pattern (the plan
 * parses them and reports a bad value in a condition instead of ignoring the object).
 */
export function isReconcilableConversation(value: unknown): value is Conversation {
  if (
    !isPlainObject(value) ||
    value['apiVersion'] !== ConversationResource.apiVersion ||
    value['kind'] !== ConversationResource.kind ||
    stringAt(value, 'metadata', 'name') === undefined ||
    stringAt(value, 'metadata', 'namespace') === undefined ||
    stringAt(value, 'metadata', 'uid') === undefined
  ) {
    return false;
  }
  // Only a pattern mismatch is let through: a value of the wrong type still fails.
  return checkAgainstSchema(conversationSchema, value, '').every(
    (error) =>
      LENIENT_FIELDS.some((prefix) => error.startsWith(prefix)) && error.includes(' should match '),
  );
}

function readConditions(obj: unknown): ObservedCondition[] {
  const out: ObservedCondition[] = [];
  for (const item of arrayAt(obj, 'status', 'conditions')) {
    const type = stringAt(item, 'type');
    const status = stringAt(item, 'status');
    if (type === undefined || status === undefined) continue;
    const reason = stringAt(item, 'reason');
    const message = stringAt(item, 'message');
    const observedGeneration = generationAt(item, 'observedGeneration');
    out.push({
      type,
      status,
      ...(reason === undefined ? {} : { reason }),
      ...(message === undefined ? {} : { message }),
      ...(observedGeneration === undefined ? {} : { observedGeneration }),
    });
  }
  return out;
}

/** A generation at `path`: a non-negative integer, else undefined. */
function generationAt(obj: unknown, ...path: string[]): number | undefined {
  const value = fieldAt(obj, ...path);
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

function readOwners(obj: unknown): ObservedOwner[] {
  const out: ObservedOwner[] = [];
  for (const item of arrayAt(obj, 'metadata', 'ownerReferences')) {
    const apiVersion = stringAt(item, 'apiVersion');
    const kind = stringAt(item, 'kind');
    const name = stringAt(item, 'name');
    const uid = stringAt(item, 'uid');
    if (apiVersion === undefined || kind === undefined || name === undefined || uid === undefined) {
      continue;
    }
    out.push({ apiVersion, kind, name, uid, controller: fieldAt(item, 'controller') === true });
  }
  return out;
}

function isDeleting(obj: unknown): boolean {
  return fieldAt(obj, 'metadata', 'deletionTimestamp') !== undefined;
}

/** A SandboxClaim from raw JSON; undefined when it has no name or uid. */
export function readClaim(obj: unknown): ObservedClaim | undefined {
  const name = stringAt(obj, 'metadata', 'name');
  const uid = stringAt(obj, 'metadata', 'uid');
  if (name === undefined || uid === undefined) return undefined;
  const generation = generationAt(obj, 'metadata', 'generation');
  const warmPoolName = stringAt(obj, 'spec', 'warmPoolRef', 'name');
  const sandboxName = stringAt(obj, 'status', 'sandbox', 'name');
  const env: ClaimEnvVar[] = [];
  for (const item of arrayAt(obj, 'spec', 'env')) {
    const envName = stringAt(item, 'name');
    if (envName === undefined) continue;
    const containerName = stringAt(item, 'containerName');
    env.push({
      name: envName,
      value: stringAt(item, 'value') ?? '',
      ...(containerName === undefined || containerName === '' ? {} : { containerName }),
    });
  }
  return {
    name,
    uid,
    ...(generation === undefined ? {} : { generation }),
    deleting: isDeleting(obj),
    owners: readOwners(obj),
    ...(warmPoolName === undefined ? {} : { warmPoolName }),
    env,
    ...(sandboxName === undefined ? {} : { sandboxName }),
    conditions: readConditions(obj),
  };
}

/** A Sandbox from raw JSON; the pod name is its annotation, else the Sandbox's name. */
export function readSandbox(obj: unknown): ObservedSandbox | undefined {
  const name = stringAt(obj, 'metadata', 'name');
  if (name === undefined) return undefined;
  return {
    name,
    deleting: isDeleting(obj),
    podName: stringAt(obj, 'metadata', 'annotations', SANDBOX_POD_NAME_ANNOTATION) ?? name,
    podIPs: arrayAt(obj, 'status', 'podIPs').filter(
      (ip): ip is string => typeof ip === 'string' && ip !== '',
    ),
    conditions: readConditions(obj),
  };
}

/** The template a SandboxWarmPool names; undefined for something that is not a pool. */
export function readWarmPool(obj: unknown): { templateName?: string } | undefined {
  if (stringAt(obj, 'metadata', 'name') === undefined) return undefined;
  const templateName = stringAt(obj, 'spec', 'sandboxTemplateRef', 'name');
  return templateName === undefined ? {} : { templateName };
}

/** A SandboxTemplate from raw JSON: its env injection policy and pod spec. */
export function readSandboxTemplate(obj: unknown): ObservedSandboxTemplate | undefined {
  if (stringAt(obj, 'metadata', 'name') === undefined) return undefined;
  const envVarsInjectionPolicy = stringAt(obj, 'spec', 'envVarsInjectionPolicy');
  const podSpec = fieldAt(obj, 'spec', 'podTemplate', 'spec');
  return {
    ...(envVarsInjectionPolicy === undefined ? {} : { envVarsInjectionPolicy }),
    ...(isPodSpecManifest(podSpec) ? { podSpec } : {}),
  };
}

/** A pod from its wire JSON. */
export function readPod(obj: unknown): ObservedPod | undefined {
  const name = stringAt(obj, 'metadata', 'name');
  const uid = stringAt(obj, 'metadata', 'uid');
  if (name === undefined || uid === undefined) return undefined;
  const phase = stringAt(obj, 'status', 'phase');
  const podIP = stringAt(obj, 'status', 'podIP');
  const statusReason = stringAt(obj, 'status', 'reason');
  const statusMessage = stringAt(obj, 'status', 'message');
  return {
    name,
    uid,
    deleting: isDeleting(obj),
    owners: readOwners(obj),
    annotations: stringMapAt(obj, 'metadata', 'annotations'),
    ...(phase === undefined ? {} : { phase }),
    ...(podIP === undefined ? {} : { podIP }),
    ready: readConditions(obj).some((c) => c.type === 'Ready' && c.status === 'True'),
    ...(statusReason === undefined ? {} : { statusReason }),
    ...(statusMessage === undefined ? {} : { statusMessage }),
  };
}

function isContainerManifest(value: unknown): value is ContainerManifest {
  return isPlainObject(value) && typeof value['name'] === 'string';
}

/**
 * A pod spec in wire JSON (a PodTemplate's `template.spec`): an object whose
 * `containers` is a non-empty list of named containers. The API server validated the
 * rest when the PodTemplate was stored; it passes through to the pod unchanged.
 */
export function isPodSpecManifest(value: unknown): value is PodSpecManifest {
  if (!isPlainObject(value)) return false;
  const containers = value['containers'];
  return (
    Array.isArray(containers) && containers.length > 0 && containers.every(isContainerManifest)
  );
}
