/**
 * The provisioner's thin shell: reads the Secrets plan.ts decides from, writes what it
 * decided, and repeats until a pass writes nothing. Writes are create-if-absent (a 409 from
 * a racing writer means someone else made it: the next pass reads theirs) and
 * compare-and-swap replaces (the resourceVersion read), so two runs never overwrite each
 * other. Only names, operations and reasons are logged, never a Secret's data.
 */
import { ApiException, type CoreV1Api, type V1Secret } from '@kubernetes/client-node';

import {
  DEFAULT_LIFETIMES,
  PROVISIONED_LABEL,
  SECRET_NAMES,
  type Lifetimes,
  type SecretName,
} from './catalog';
import { contentOf } from './materials';
import { plan, type Action, type ObservedSecret } from './plan';

/** Where log lines go (a pino logger fits). */
export interface ProvisionLog {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

/** Options of {@link Provisioner}. */
export interface ProvisionerOptions {
  readonly core: Pick<
    CoreV1Api,
    'readNamespacedSecret' | 'createNamespacedSecret' | 'replaceNamespacedSecret'
  >;
  readonly namespace: string;
  /** Secrets another issuer writes (cert-manager): checked only. */
  readonly external?: ReadonlySet<string>;
  readonly lifetimes?: Lifetimes;
  /** @default () => new Date() */
  readonly now?: () => Date;
  readonly log: ProvisionLog;
}

/** What a run did and what is left for a person or another issuer. */
export interface ProvisionReport {
  readonly written: readonly { name: SecretName; op: 'create' | 'replace'; reason: string }[];
  /** `problem` and `wait` actions of the last pass. */
  readonly outstanding: readonly Extract<Action, { op: 'problem' | 'wait' }>[];
}

const MAX_PASSES = 5;

function isCode(err: unknown, code: number): boolean {
  return err instanceof ApiException && err.code === code;
}

/** Creates, renews and checks the Secrets of docs/operator.md, "Installing: what the operator provisions". */
export class Provisioner {
  private readonly external: ReadonlySet<string>;
  private readonly lifetimes: Lifetimes;
  private readonly now: () => Date;

  constructor(private readonly options: ProvisionerOptions) {
    this.external = options.external ?? new Set();
    this.lifetimes = options.lifetimes ?? DEFAULT_LIFETIMES;
    this.now = options.now ?? (() => new Date());
  }

  /**
   * Runs passes until one writes nothing.
   *
   * @throws ApiException when the API server refuses a read or a write for another reason
   *   than a lost race (403: the Role is missing a right).
   */
  async run(): Promise<ProvisionReport> {
    const written: { name: SecretName; op: 'create' | 'replace'; reason: string }[] = [];
    for (let pass = 0; pass < MAX_PASSES; pass += 1) {
      const actions = plan({
        namespace: this.options.namespace,
        now: this.now(),
        lifetimes: this.lifetimes,
        external: this.external,
        secrets: await this.observe(),
      });
      const writes = actions.filter((a) => a.op === 'create' || a.op === 'replace');
      if (writes.length === 0) {
        const outstanding = actions.filter((a) => a.op === 'problem' || a.op === 'wait');
        for (const a of outstanding) this.options.log.warn({ secret: a.name }, a.message);
        return { written, outstanding };
      }
      for (const action of writes) {
        if (await this.write(action)) {
          written.push({ name: action.name, op: action.op, reason: action.reason });
        }
      }
    }
    throw new Error(`provisioning did not settle in ${MAX_PASSES} passes`);
  }

  private async observe(): Promise<Map<string, ObservedSecret>> {
    const found = new Map<string, ObservedSecret>();
    for (const name of SECRET_NAMES) {
      let secret: V1Secret;
      try {
        secret = await this.options.core.readNamespacedSecret({
          name,
          namespace: this.options.namespace,
        });
      } catch (err) {
        if (isCode(err, 404)) continue;
        throw err;
      }
      const data = Object.fromEntries(
        Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')]),
      );
      found.set(name, {
        owned: secret.metadata?.labels?.[PROVISIONED_LABEL.key] === PROVISIONED_LABEL.value,
        resourceVersion: secret.metadata?.resourceVersion ?? '',
        data,
      });
    }
    return found;
  }

  /** Writes one Secret; false when another writer got there first (the next pass re-reads). */
  private async write(action: Extract<Action, { op: 'create' | 'replace' }>): Promise<boolean> {
    const { namespace } = this.options;
    const content = contentOf(action.material, this.now(), this.lifetimes);
    const body: V1Secret = {
      metadata: {
        name: action.name,
        namespace,
        labels: {
          [PROVISIONED_LABEL.key]: PROVISIONED_LABEL.value,
          'app.kubernetes.io/part-of': 'polychrome',
        },
        ...(action.op === 'replace' ? { resourceVersion: action.resourceVersion } : {}),
      },
      type: content.type,
      stringData: content.data,
    };
    try {
      if (action.op === 'create')
        await this.options.core.createNamespacedSecret({ namespace, body });
      else await this.options.core.replaceNamespacedSecret({ name: action.name, namespace, body });
    } catch (err) {
      if (isCode(err, 409)) {
        this.options.log.info(
          { secret: action.name },
          'another writer changed it first; reading it again',
        );
        return false;
      }
      throw err;
    }
    this.options.log.info(
      { secret: action.name, op: action.op, reason: action.reason },
      `${action.op === 'create' ? 'created' : 'renewed'} ${action.name}`,
    );
    return true;
  }
}
