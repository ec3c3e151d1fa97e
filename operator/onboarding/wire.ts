/**
 * Between wire JSON, which onboarding renders and compares, and @kubernetes/client-node's
 * models, which KubernetesObjectApi sends and returns. For a kind it has a model of, the
 * client's serializer writes only the model's attributes and renames some: NetworkPolicy's
 * `from` is `_from` in the model, so wire JSON handed to it as it is loses every `from` (an
 * ingress rule that then admits every source), and an object read back carries `_from`.
 */
import { dumpYaml, loadYaml, type KubernetesObject } from '@kubernetes/client-node';
import { parse } from 'yaml';

/** `wire` as the client's model of its kind, for KubernetesObjectApi to send. */
export function toClientModel<T extends KubernetesObject>(wire: T): T {
  return loadYaml<T>(JSON.stringify(wire));
}

/** Wire JSON of an object KubernetesObjectApi returned. */
export function toWire(model: KubernetesObject): unknown {
  return parse(dumpYaml(model)) as unknown;
}
