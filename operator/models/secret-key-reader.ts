/**
 * Reads a model's API key out of its Secret, as the control plane (docs/operator.md, "The
 * key Secret"): a GET of that one Secret, which the namespace owner grants by name. The key
 * goes only to the caller; nothing here logs it or puts it in an error.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { AppError } from '../../common/errors';
import { apiErrorMessage, apiStatusCode } from '../controller/kube-api-errors';
import { makeKeepAliveApiClient } from '../controller/keep-alive-client';

/** Which Secret, and which key in it. */
export interface SecretKeyRef {
  readonly namespace: string;
  readonly name: string;
  readonly key: string;
}

/** What a read found. */
export type SecretKeyRead =
  /** The key holds a value; `resourceVersion` changes when the Secret does. */
  | { readonly kind: 'found'; readonly value: string; readonly resourceVersion: string }
  /** The control plane may not get the Secret. */
  | { readonly kind: 'forbidden' }
  | { readonly kind: 'not_found' }
  /** The Secret has no such key, or it is empty. */
  | { readonly kind: 'key_missing' };

/** Reads one key of one Secret. */
export interface SecretKeyReader {
  /** @throws AppError `unavailable` when the API server could not answer. */
  read(ref: SecretKeyRef): Promise<SecretKeyRead>;
}

/** A {@link SecretKeyReader} over the Kubernetes API, with the control plane's identity. */
export class KubeSecretKeyReader implements SecretKeyReader {
  private readonly core: CoreV1Api;

  constructor(kubeConfig: KubeConfig) {
    this.core = makeKeepAliveApiClient(kubeConfig, CoreV1Api);
  }

  async read(ref: SecretKeyRef): Promise<SecretKeyRead> {
    let data: Record<string, string> | undefined;
    let resourceVersion: string;
    try {
      const secret = await this.core.readNamespacedSecret({
        namespace: ref.namespace,
        name: ref.name,
      });
      data = secret.data;
      resourceVersion = secret.metadata?.resourceVersion ?? '';
    } catch (error: unknown) {
      const code = apiStatusCode(error);
      if (code === 403) return { kind: 'forbidden' };
      if (code === 404) return { kind: 'not_found' };
      // The API's Status message, never the request or the object.
      throw new AppError(
        'unavailable',
        `reading Secret ${ref.namespace}/${ref.name} failed (${apiErrorMessage(error)}); it is read again on the next model call`,
      );
    }
    const encoded = data?.[ref.key];
    const value =
      encoded === undefined ? '' : Buffer.from(encoded, 'base64').toString('utf8').trim();
    if (value === '') return { kind: 'key_missing' };
    return { kind: 'found', value, resourceVersion };
  }
}
