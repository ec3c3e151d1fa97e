/**
 * The released chart's values pinned to the release (docs/release.md, "The Helm chart"):
 * `make release` (hack/release.sh) writes the registry it pushed to into `image.registry`
 * and each plane's index digest into `<plane>.image.digest` of the packaged chart's
 * values.yaml before it pushes the chart, so `helm install` with the defaults runs the
 * images the release signed, by digest, as polychrome.yaml does.
 *
 *   tsx hack/release/pin-chart.ts VALUES_YAML REGISTRY/control-plane@sha256:… \
 *     REGISTRY/state@sha256:… REGISTRY/harness@sha256:…
 *
 * rewrites VALUES_YAML in place (its comments kept).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import { PLANE_IMAGES } from '../chart/values';

const DIGEST = /^sha256:[0-9a-f]{64}$/u;

/** One pushed index: `<registry>/<repository>@sha256:…`. */
function splitRef(ref: string): { repository: string; digest: string } {
  const at = ref.lastIndexOf('@');
  const digest = at < 0 ? '' : ref.slice(at + 1);
  if (!DIGEST.test(digest))
    throw new Error(
      `'${ref}' is not an image pinned by digest (<registry>/<plane>@sha256:<64 hex>)`,
    );
  return { repository: ref.slice(0, at), digest };
}

/**
 * `values` (the chart's values.yaml) with `image.registry` and each plane's
 * `image.digest` set from `refs`, one pushed index per plane in PLANE_IMAGES' order
 * (control plane, state, harness). Each ref must be `<registry>/<the plane's
 * image.repository>@sha256:…`, all under one registry.
 *
 * @throws Error naming the reference or the value that does not fit.
 */
export function pinChartValues(values: string, refs: readonly string[]): string {
  if (refs.length !== PLANE_IMAGES.length)
    throw new Error(
      `expected ${String(PLANE_IMAGES.length)} image references (${PLANE_IMAGES.map((p) => p.image).join(', ')}), got ${String(refs.length)}`,
    );
  const doc = parseDocument(values);
  if (doc.errors.length > 0) throw new Error(`the chart's values.yaml: ${doc.errors[0]?.message}`);
  const registries = new Set<string>();
  PLANE_IMAGES.forEach(({ key }, i) => {
    const ref = refs[i] ?? '';
    const { repository, digest } = splitRef(ref);
    const path = [key, 'image', 'repository'];
    const name = doc.getIn(path);
    if (typeof name !== 'string' || name === '')
      throw new Error(`the chart's values.yaml has no ${path.join('.')}`);
    if (!repository.endsWith(`/${name}`))
      throw new Error(
        `'${ref}' is not in the repository ${path.join('.')} names ('${name}'): <registry>/${name}@sha256:…`,
      );
    registries.add(repository.slice(0, -name.length - 1));
    if (!doc.hasIn([key, 'image', 'digest']))
      throw new Error(`the chart's values.yaml has no ${key}.image.digest`);
    doc.setIn([key, 'image', 'digest'], digest);
  });
  if (registries.size !== 1)
    throw new Error(`the images are under different registries: ${[...registries].join(', ')}`);
  if (!doc.hasIn(['image', 'registry']))
    throw new Error("the chart's values.yaml has no image.registry");
  doc.setIn(['image', 'registry'], [...registries][0]);
  return doc.toString({ lineWidth: 0 });
}

if (require.main === module) {
  const [file, ...refs] = process.argv.slice(2);
  try {
    if (file === undefined)
      throw new Error(
        'usage: tsx hack/release/pin-chart.ts VALUES_YAML CONTROL_PLANE_REF STATE_REF HARNESS_REF',
      );
    writeFileSync(file, pinChartValues(readFileSync(file, 'utf8'), refs));
  } catch (error: unknown) {
    console.error(`pin-chart: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
}
