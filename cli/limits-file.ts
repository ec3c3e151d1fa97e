import { readFile } from 'node:fs/promises';
import { UsageError } from './cli-support';

/*
 * The spend limits file of `payments link` and `personas payment-policy set`
 * (docs/payments.md, "Spend limits"): read and parsed as JSON, then sent as read.
 */

/**
 * The spend limits in `file` (JSON, sent as read: the control plane checks them).
 * @throws UsageError when it cannot be read or is not JSON.
 */
export async function limitsFrom(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new UsageError(
      `--limits ${file}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new UsageError(
      `--limits ${file} is not JSON: ${error instanceof Error ? error.message : String(error)} (docs/payments.md, "Spend limits")`,
    );
  }
}
