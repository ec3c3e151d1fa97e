/**
 * The Helm chart's values (charts/polychrome, docs/operator.md "Helm"): which field of which
 * kustomize-built object each value replaces, and the optional bundles each flag turns on.
 * One table: hack/chart/render.ts writes the templates, values.yaml and values.schema.json
 * from it, and the defaults are read from the kustomize builds themselves, so the chart with
 * default values renders what `kubectl kustomize config/default` builds.
 */
import { PaymentProtocolName } from '../../operator/payments/charge';
import { WALLET_NAME_PATTERN, walletSecretName } from '../../operator/payments/secret-store';

/**
 * A step of a path into an object: a key, the element of a list at an index, or the element
 * of a list whose `name` (or `metadata.name`, as in volumeClaimTemplates) is this.
 */
export type PathStep = string | number | { readonly named: string };

/** A field of one object that a value replaces (its default is the field's value in the build). */
export interface ValueField {
  /** The object's kind and name (metadata.name), as the kustomize build names them. */
  readonly kind: string;
  readonly name: string;
  /** Where the field is, from the object's root. */
  readonly path: readonly PathStep[];
  /** The value's path under .Values, dotted (`controlPlane.replicas`). */
  readonly value: string;
  /**
   * `scalar`: one value in place; `block`: a map written with toYaml; `names`: a list of
   * names, each written as `prefix` and the name.
   */
  readonly style: 'scalar' | 'block' | 'names';
  /** A pipe applied to a scalar (`quote` for strings). */
  readonly pipe?: string;
  /** For `names`: what each name is written after (the field holds prefixed names). */
  readonly prefix?: string;
  /**
   * The key of the optional part (COMPONENTS) the value belongs to: its default is the
   * field in that part's build, and while the part is off the field keeps config/default's.
   */
  readonly component?: string;
  /** The value's JSON schema, when not the one its style implies (values-file.ts). */
  readonly schema?: Readonly<Record<string, unknown>>;
  /** What the value is, for values.yaml and docs/operator.md. */
  readonly description: string;
}

/** The Secrets the control plane reads wallet keys from are this and the wallet's name. */
const WALLET_SECRET_PREFIX = walletSecretName('');

/** A protocol list as POLYCHROME_PAYMENT_PROTOCOLS takes it: one, or both separated by a comma. */
const PROTOCOL = `(${Object.values(PaymentProtocolName).join('|')})`;

const container = (name: string): PathStep[] => [
  'spec',
  'template',
  'spec',
  'containers',
  { named: name },
];

/** Every field a value replaces. */
export const VALUE_FIELDS: readonly ValueField[] = [
  {
    kind: 'Deployment',
    name: 'polychrome-control-plane',
    path: ['spec', 'replicas'],
    value: 'controlPlane.replicas',
    style: 'scalar',
    description:
      'Replicas of the control plane (at least 1; 2 or more keep the public API and the Kubernetes door up through a rollout or a node drain).',
  },
  {
    kind: 'Deployment',
    name: 'polychrome-control-plane',
    path: [...container('control-plane'), 'resources'],
    value: 'controlPlane.resources',
    style: 'block',
    description: "The control plane container's resources.",
  },
  {
    kind: 'Deployment',
    name: 'polychrome-provisioner',
    path: [...container('provisioner'), 'resources'],
    value: 'provisioner.resources',
    style: 'block',
    description: "The provisioner container's resources.",
  },
  {
    kind: 'StatefulSet',
    name: 'polychrome-state',
    path: [...container('state'), 'resources'],
    value: 'state.resources',
    style: 'block',
    description:
      "The state plane container's resources. It runs one replica on purpose (the only writer of the journals).",
  },
  {
    kind: 'StatefulSet',
    name: 'polychrome-state',
    path: [
      'spec',
      'volumeClaimTemplates',
      { named: 'journal' },
      'spec',
      'resources',
      'requests',
      'storage',
    ],
    value: 'state.storage',
    style: 'scalar',
    pipe: 'quote',
    description:
      "The state plane's volume (journals and records). A StatefulSet's claim cannot be resized by an upgrade: set it before the first install.",
  },
  {
    kind: 'Deployment',
    name: 'polychrome-control-plane',
    path: [
      ...container('control-plane'),
      'env',
      { named: 'POLYCHROME_PAYMENT_PROTOCOLS' },
      'value',
    ],
    value: 'payments.protocols',
    style: 'scalar',
    pipe: 'quote',
    component: 'payments',
    schema: { type: 'string', pattern: `^${PROTOCOL}(,${PROTOCOL})?$` },
    description:
      'The protocols the control plane pays, in the order it prefers them: x402, mpp, or both (x402,mpp).',
  },
  {
    kind: 'Deployment',
    name: 'polychrome-control-plane',
    path: [...container('control-plane'), 'env', { named: 'POLYCHROME_MPP_TOKENS' }, 'value'],
    value: 'payments.mppTokens',
    style: 'scalar',
    pipe: 'quote',
    component: 'payments',
    schema: { type: 'string', pattern: '^(\\[.*\\])?$' },
    description:
      'The tokens MPP is paid in, JSON ([{"network", "asset", "name", "version"}], docs/payments.md); required when protocols names mpp, refused otherwise.',
  },
  {
    kind: 'Role',
    name: 'polychrome-control-plane-wallets',
    path: ['rules', 0, 'resourceNames'],
    value: 'payments.wallets',
    style: 'names',
    prefix: WALLET_SECRET_PREFIX,
    component: 'payments',
    // Never empty: a rule without names would grant every Secret of the namespace.
    schema: {
      type: 'array',
      minItems: 1,
      uniqueItems: true,
      items: { type: 'string', pattern: WALLET_NAME_PATTERN },
    },
    description:
      'The wallets an admin may link: the control plane may get exactly the Secrets polychrome-wallet-<name> of its namespace (at least one; never list).',
  },
];

/** The planes' images: the name in the build's image references, and the values key. */
export const PLANE_IMAGES = [
  { image: 'control-plane', key: 'controlPlane', what: 'the control plane and the provisioner' },
  { image: 'state', key: 'state', what: 'the state plane' },
  { image: 'harness', key: 'harness', what: 'harness pods (both sandbox backends)' },
] as const;

/** An optional part of the install and the kustomize tree it is rendered from. */
export interface Component {
  /** The values key; the flag is `<key>.<flag>`. */
  readonly key: string;
  readonly flag: 'enabled' | 'create';
  /** The kustomize tree, relative to the repository root. */
  readonly source: string;
  /**
   * `overlay`: a build of config/default plus the component (its objects that config/default
   * lacks are added, the ones it changes replace config/default's); `bundle`: a build of its
   * own, added as it is.
   */
  readonly shape: 'overlay' | 'bundle';
  /** The template file its own objects go to. */
  readonly file: string;
  readonly description: string;
}

/** The optional parts, each off by default (config/default does not include them). */
export const COMPONENTS: readonly Component[] = [
  {
    key: 'kubeApi',
    flag: 'enabled',
    source: 'config/with-kube-api',
    shape: 'overlay',
    file: 'kube-api.yaml',
    description:
      'The Kubernetes door, the aggregated API api.polychrome.dev (docs/kube-api.md). Needs cert-manager, which issues its serving certificate and fills the APIService caBundle.',
  },
  {
    key: 'certManagerPki',
    flag: 'enabled',
    source: 'config/with-cert-manager-pki',
    shape: 'overlay',
    file: 'cert-manager-pki.yaml',
    description:
      "The state plane's mTLS CA and certificates and the harness CA from cert-manager instead of the provisioner. Needs cert-manager.",
  },
  {
    key: 'monitoring',
    flag: 'enabled',
    source: 'config/monitoring',
    shape: 'bundle',
    file: 'monitoring.yaml',
    description:
      'ServiceMonitors, the harness PodMonitor and the alerts (docs/observability.md). Needs the prometheus-operator CRDs.',
  },
  {
    key: 'conversations',
    flag: 'create',
    source: 'config/conversations',
    shape: 'bundle',
    file: 'conversations.yaml',
    description:
      "Create the conversations namespace, labelled polychrome.dev/enabled=true: the operator installs config/sandbox's SandboxTemplate, warm pool and NetworkPolicy and the harness Secrets there. Needs agent-sandbox.",
  },
  {
    key: 'payments',
    flag: 'enabled',
    source: 'config/with-payments',
    shape: 'overlay',
    file: 'payments.yaml',
    description:
      'Payments (docs/payments.md, "Turning payments on"): the control plane pays in payments.protocols, with the keys of the wallets payments.wallets names. Nothing is paid until an admin links a wallet to a conversation.',
  },
];

/**
 * Namespace names in the builds that become template expressions: the base's namespace
 * becomes the release's, and the public API's conversations namespace a value.
 */
export const BASE_NAMESPACE = 'polychrome-system';
export const CONVERSATIONS_NAMESPACE = 'polychrome-conversations';
export const CONVERSATIONS_NAMESPACE_VALUE = 'conversations.namespace';

/** The Helm annotation an object gets when Argo CD must never delete it (`Delete=false`). */
export const KEEP_ANNOTATION = 'helm.sh/resource-policy';
