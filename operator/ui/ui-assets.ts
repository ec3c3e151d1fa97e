/**
 * The forensics UI's static files (docs/ui.md), served read-only on the Kubernetes door at
 * `/apis/api.polychrome.dev/v1alpha1/namespaces/{namespace}/ui/{file}`. `npm run build`
 * bundles ui/ into `dist/ui` (hack/build-ui.ts); the control plane reads that folder once
 * when it starts and answers from memory: no path from a request ever reaches the file
 * system. Every answer carries a strict Content-Security-Policy (no inline script, nothing
 * from another origin), `nosniff` and an ETag to revalidate against.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

/** What a file name in the bundle may look like: flat, so RBAC sees it as a resource name. */
const FILE_NAME = /^[a-z0-9][a-z0-9.-]{0,63}$/u;

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
  png: 'image/png',
};

/** The headers every UI answer carries. */
export const UI_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

interface Asset {
  readonly body: Buffer;
  readonly contentType: string;
  readonly etag: string;
}

/** One answer: status, headers and body. */
export interface UiAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/**
 * The bundle folder: `dist/ui` beside the compiled code (`dist/operator/ui/` runs from
 * `dist`), or the repository's `dist/ui` when the control plane runs from source.
 */
export function defaultUiDir(): string {
  const besideCompiled = resolve(__dirname, '..', '..', 'ui');
  return existsSync(join(besideCompiled, 'index.html'))
    ? besideCompiled
    : resolve(__dirname, '..', '..', 'dist', 'ui');
}

export class UiAssets {
  private constructor(
    private readonly files: ReadonlyMap<string, Asset>,
    /** Where the files came from, for the message when the bundle is missing. */
    readonly dir: string,
  ) {}

  /**
   * Reads the bundle in `dir` (flat: files whose names {@link FILE_NAME} allows, of a known
   * type). A missing folder gives an empty set, which answers every file NotFound with a
   * message saying to build it.
   */
  static async load(dir: string = defaultUiDir()): Promise<UiAssets> {
    const files = new Map<string, Asset>();
    const names = existsSync(dir) ? await readdir(dir) : [];
    for (const name of names) {
      const type = CONTENT_TYPES[name.slice(name.lastIndexOf('.') + 1)];
      if (!FILE_NAME.test(name) || type === undefined) continue;
      const body = await readFile(join(dir, name));
      const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
      files.set(name, { body, contentType: type, etag });
    }
    return new UiAssets(files, dir);
  }

  /** True when the bundle has its entry page. */
  get built(): boolean {
    return this.files.has('index.html');
  }

  /**
   * The answer for `file`: 200 with the file, 304 when `ifNoneMatch` names its ETag, 404
   * (with a message saying what exists) otherwise. Only the UI's own files are served.
   */
  serve(file: string, ifNoneMatch: string | undefined): UiAnswer {
    const asset = this.files.get(file);
    if (asset === undefined) {
      const message = this.built
        ? `no UI file ${JSON.stringify(file.slice(0, 80))}; the UI starts at ui/index.html`
        : 'the forensics UI is not built into this control plane; build it with `npm run build` (docs/ui.md)';
      const body = Buffer.from(message);
      return {
        status: 404,
        headers: {
          ...UI_SECURITY_HEADERS,
          'content-type': 'text/plain; charset=utf-8',
          'cache-control': 'no-store',
        },
        body,
      };
    }
    const headers = {
      ...UI_SECURITY_HEADERS,
      'content-type': asset.contentType,
      // Revalidate every time: the files are small, and a new control plane may bring a new bundle.
      'cache-control': 'private, no-cache',
      etag: asset.etag,
    };
    if (ifNoneMatch !== undefined && ifNoneMatch.split(/\s*,\s*/u).includes(asset.etag)) {
      return { status: 304, headers, body: Buffer.alloc(0) };
    }
    return { status: 200, headers, body: asset.body };
  }
}
