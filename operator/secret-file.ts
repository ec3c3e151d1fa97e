import { readFile } from 'node:fs/promises';
import { ConfigError } from '../common/config';

/** A secret held in a file (a mounted Secret key), trimmed. */
export async function readSecretFile(path: string, variable: string): Promise<string> {
  let text: string;
  try {
    text = (await readFile(path, 'utf8')).trim();
  } catch (error) {
    throw new ConfigError('control plane', [
      { variable, message: `names a file that cannot be read (${(error as Error).message})` },
    ]);
  }
  if (text === '') {
    throw new ConfigError('control plane', [{ variable, message: 'names an empty file' }]);
  }
  return text;
}
