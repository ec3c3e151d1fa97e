/**
 * The thin shell around plan.ts for one namespace: reads the objects of our names there and
 * the provisioner's two source Secrets, asks the plan, and carries it out. Creates are POSTs
 * (a 409 means someone made the object in between: the next pass sees whose it is, so an
 * object is never adopted by a race); changes to ours are server-side applies with our
 * field manager and the resourceVersion read as a precondition, of what the server keeps of
 * ours (a dry-run merge patch says what that is: a field the CRD does not declare is neither
 * refused nor written again on every pass); deletes carry the uid read,
 * so only the object we saw as ours is deleted. The harness certificate is minted here
 * (issue.ts), and its key goes into the Secret only, never a log line. An object of our name
 * that is not ours is reported as a Kubernetes Event on it.
 */
import {
  ApiException,
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  type KubeConfig,
  type KubernetesObject,
  type V1Namespace,
} from '@kubernetes/client-node';

import { DEFAULT_LIFETIMES, SecretName, type Lifetimes } from '../provision/catalog';
import type { SecretData } from '../provision/inspect';
import type { ProvisionLog } from '../provision/provisioner';
import {
  ONBOARDED_LABEL,
  ONBOARDED_REFS,
  ONBOARDING_FIELD_MANAGER,
  refKey,
  type ObjectRef,
} from './catalog';
import { droppedFields, holds, keptBy, type Manifest, type Placement } from './desired';
import { issueHarnessTls } from './issue';
import { toClientModel, toWire } from './wire';
import type { ConflictEvents } from './conflict-events';
import {
  planOnboarding,
  type CredentialSources,
  type ObservedObject,
  type OnboardingAction,
} from './plan';

/** Where log lines go: the provisioner's log (a pino logger fits). */
export type OnboardingLog = ProvisionLog;

/** Options of {@link NamespaceOnboarder}. */
export interface NamespaceOnboarderOptions {
  readonly kubeConfig: KubeConfig;
  readonly placement: Placement;
  readonly log: OnboardingLog;
  readonly events?: ConflictEvents;
  readonly lifetimes?: Lifetimes;
  /** @default () => new Date() */
  readonly now?: () => Date;
}

/** What one sync did. */
export interface SyncResult {
  /** Writes made, as `op Kind name`. */
  readonly written: readonly string[];
  /** Objects refused (not ours) or waiting (sources missing, a lost race, being deleted). */
  readonly pending: readonly Extract<OnboardingAction, { op: 'conflict' | 'wait' }>[];
  /** A write lost a race (409): sync again soon. */
  readonly raced: boolean;
}

function code(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

/** Syncs one namespace's onboarded objects with its label. */
export class NamespaceOnboarder {
  private readonly objects: KubernetesObjectApi;
  private readonly core: CoreV1Api;
  private readonly now: () => Date;

  constructor(private readonly options: NamespaceOnboarderOptions) {
    this.objects = KubernetesObjectApi.makeApiClient(options.kubeConfig);
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.now = options.now ?? (() => new Date());
  }

  /** The provisioner's Secrets the credentials come from (undefined when absent). */
  async readSources(): Promise<CredentialSources> {
    const read = async (name: string): Promise<SecretData | undefined> => {
      try {
        const secret = await this.core.readNamespacedSecret({
          name,
          namespace: this.options.placement.controlPlaneNamespace,
        });
        return Object.fromEntries(
          Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')]),
        );
      } catch (err) {
        if (code(err) === 404) return undefined;
        throw err;
      }
    };
    return {
      harnessCa: await read(SecretName.HarnessCa),
      approvalKey: await read(SecretName.ApprovalKey),
    };
  }

  /**
   * Brings `namespace` in line with its label, from `sources` (read fresh when not given).
   *
   * @throws ApiException when a read or write is refused for another reason than a lost race.
   */
  async sync(namespace: V1Namespace, sources?: CredentialSources): Promise<SyncResult> {
    const name = namespace.metadata?.name ?? '';
    const actions = planOnboarding({
      namespace: {
        name,
        labels: namespace.metadata?.labels ?? {},
        deleting: namespace.metadata?.deletionTimestamp !== undefined,
      },
      placement: this.options.placement,
      sources: sources ?? (await this.readSources()),
      observed: await this.observe(name),
      now: this.now(),
      lifetimes: this.options.lifetimes ?? DEFAULT_LIFETIMES,
    });
    const written: string[] = [];
    const pending: Extract<OnboardingAction, { op: 'conflict' | 'wait' }>[] = [];
    let raced = false;
    for (const action of actions) {
      if (action.op === 'conflict' || action.op === 'wait') {
        pending.push(action);
        if (action.op === 'conflict') await this.options.events?.conflict(name, action);
        this.options.log.warn({ namespace: name, object: refKey(action.ref) }, action.message);
        continue;
      }
      const outcome = await this.carryOut(name, action);
      if (outcome === 'written') {
        written.push(`${action.op} ${action.ref.kind} ${action.ref.name}`);
        this.options.log.info(
          { namespace: name, op: action.op, kind: action.ref.kind, object: action.ref.name },
          `onboarding: ${action.op} ${action.ref.kind} ${action.ref.name}`,
        );
      } else if (outcome === 'raced') raced = true;
    }
    return { written, pending, raced };
  }

  /** The objects of our names in `namespace`. */
  private async observe(namespace: string): Promise<Map<string, ObservedObject>> {
    const found = new Map<string, ObservedObject>();
    for (const ref of ONBOARDED_REFS) {
      let obj: KubernetesObject;
      try {
        obj = await this.objects.read({
          apiVersion: ref.apiVersion,
          kind: ref.kind,
          metadata: { name: ref.name, namespace },
        });
      } catch (err) {
        if (code(err) === 404) continue;
        throw err;
      }
      const body = toWire(obj);
      found.set(refKey(ref), {
        owned: obj.metadata?.labels?.[ONBOARDED_LABEL.key] === ONBOARDED_LABEL.value,
        uid: obj.metadata?.uid ?? '',
        resourceVersion: obj.metadata?.resourceVersion ?? '',
        deleting: obj.metadata?.deletionTimestamp !== undefined,
        body,
      });
    }
    return found;
  }

  /**
   * One write: `raced` when it lost a race (409, or the object went away before an apply)
   * and the next pass must decide again; `unchanged` when the server already holds all it
   * keeps of ours.
   */
  private async carryOut(
    namespace: string,
    action: Exclude<OnboardingAction, { op: 'conflict' | 'wait' }>,
  ): Promise<'written' | 'unchanged' | 'raced'> {
    try {
      switch (action.op) {
        case 'create':
          await this.objects.create(
            toClientModel(action.object),
            undefined,
            undefined,
            ONBOARDING_FIELD_MANAGER,
          );
          return 'written';
        case 'apply':
          return await this.applyKept(namespace, action);
        case 'issue': {
          const lifetimes = this.options.lifetimes ?? DEFAULT_LIFETIMES;
          const object = issueHarnessTls(namespace, action.from, this.now(), lifetimes);
          if (action.resourceVersion === undefined) {
            await this.objects.create(
              toClientModel(object),
              undefined,
              undefined,
              ONBOARDING_FIELD_MANAGER,
            );
          } else await this.apply(object, action.resourceVersion);
          return 'written';
        }
        case 'delete':
          await this.delete(namespace, action.ref, action.uid);
          return 'written';
      }
    } catch (err) {
      if (code(err) === 409) return 'raced';
      throw err;
    }
  }

  /**
   * Puts back what the server keeps of ours. A dry-run merge patch of ours says what that
   * is (a custom resource's server drops a field its CRD does not declare, where a
   * server-side apply would be refused), and when the object as read already holds it,
   * nothing is written: a dropped field is not written again on every pass.
   */
  private async applyKept(
    namespace: string,
    action: Extract<OnboardingAction, { op: 'apply' }>,
  ): Promise<'written' | 'unchanged' | 'raced'> {
    let answer: KubernetesObject;
    try {
      answer = await this.objects.patch(
        toClientModel(action.object),
        undefined,
        'All',
        ONBOARDING_FIELD_MANAGER,
        undefined,
        PatchStrategy.MergePatch,
      );
    } catch (err) {
      if (code(err) === 404) return 'raced';
      throw err;
    }
    const servable = keptBy(action.object, toWire(answer));
    if (holds(action.stored, servable)) return 'unchanged';
    const dropped = droppedFields(action.object, servable);
    if (dropped.length > 0) {
      this.options.log.warn(
        { namespace, kind: action.ref.kind, object: action.ref.name, dropped },
        `onboarding: the API server does not keep ${dropped.join(', ')} of ` +
          `${action.ref.kind} ${action.ref.name} (its CRD does not declare it): written without it`,
      );
    }
    await this.apply(servable, action.resourceVersion);
    return 'written';
  }

  /** Server-side apply of ours, forced over other managers, at the version we read. */
  private async apply(object: Manifest, resourceVersion: string): Promise<void> {
    await this.objects.patch(
      toClientModel({ ...object, metadata: { ...object.metadata, resourceVersion } }),
      undefined,
      undefined,
      ONBOARDING_FIELD_MANAGER,
      true,
      PatchStrategy.ServerSideApply,
    );
  }

  /** Deletes the object of `uid` (the one read as ours); gone already is success. */
  private async delete(namespace: string, ref: ObjectRef, uid: string): Promise<void> {
    try {
      await this.objects.delete(
        { apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, namespace } },
        undefined,
        undefined,
        undefined,
        undefined,
        'Background',
        { preconditions: { uid } },
      );
    } catch (err) {
      if (code(err) !== 404) throw err;
    }
  }
}
