import { readFile } from 'node:fs/promises';

import { readFirst, ReloadingFiles, type ReloadOptions } from './reloading-files';
import { caProblem } from './serving-certificate';

export interface CaBundleFileOptions extends ReloadOptions {
  /** The bundle (PEM): every block must be a CA certificate. */
  readonly caPath: string;
}

/**
 * A CA bundle alone, read again while the process runs (the rule: reloading-files.ts): the
 * control plane's harness CA (`POLYCHROME_HARNESS_CA_FILE`, operator/harness-ca.ts), which
 * it checks each harness's certificate against. A bundle that cannot be read, holds no PEM
 * certificate, or holds one that is not a CA is refused, and the bundle in use is kept.
 */
export class CaBundleFile extends ReloadingFiles<string> {
  /**
   * Reads the bundle once.
   * @throws Error naming the file when it cannot be read or is not a CA bundle
   */
  static async load(options: CaBundleFileOptions): Promise<CaBundleFile> {
    const { caPath } = options;
    const source = {
      paths: [caPath],
      describe: caPath,
      noun: 'bundle',
      read: () => readFile(caPath, 'utf8'),
      same: (a: string, b: string) => a === b,
      unusable: caProblem,
    };
    return new CaBundleFile(source, options, await readFirst(source, options));
  }

  /** The bundle in use (PEM). */
  get bundle(): string {
    return this.value;
  }
}
