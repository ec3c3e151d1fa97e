import type { SecretKeyReader } from '../../operator/models/secret-key-reader';

/**
 * A Secret reader for routes that carry no `secretKeyRef`: reading any Secret fails the
 * test (test/integration/model-relay.test.ts reads real ones).
 */
export const noSecrets: SecretKeyReader = {
  read: (ref) => Promise.reject(new Error(`no Secret is read here, yet ${ref.name} was`)),
};
