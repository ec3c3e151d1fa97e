/**
 * The shape of one object of config/sandbox as sandbox-bundle.ts holds it: wire JSON, with
 * the identity fields the onboarding plan reads typed and the rest passed through as built.
 */
export interface BundleObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly labels?: Readonly<Record<string, string>> };
  readonly [field: string]: unknown;
}
