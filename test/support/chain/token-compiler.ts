/*
 * Compiles the EIP-3009 test token (Eip3009Token.sol) with solc from npm, the compiler
 * pinned in package.json. The committed artifact (eip3009-token.json) is what tests
 * deploy; token-compiler.test.ts rebuilds it from the source and fails if they differ.
 *
 * Regenerate the artifact after changing the source:
 *   npx tsx test/support/chain/token-compiler.ts --write
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// solc ships CommonJS without an ESM default export typed for us.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const solc = require('solc') as { compile(input: string): string; version(): string };

/** The file name the source is compiled under (it appears in the metadata hash). */
export const TOKEN_SOURCE_NAME = 'Eip3009Token.sol';
const CONTRACT = 'Eip3009Token';
const ARTIFACT_PATH = join(__dirname, 'eip3009-token.json');

/** A compiled contract: its ABI and creation bytecode (0x-prefixed hex). */
export interface TokenArtifact {
  readonly compiler: string;
  readonly abi: readonly unknown[];
  readonly bytecode: `0x${string}`;
}

interface SolcOutput {
  errors?: { severity: string; formattedMessage: string }[];
  contracts?: Record<
    string,
    Record<string, { abi: unknown[]; evm: { bytecode: { object: string } } }>
  >;
}

/** Compiles the token source with fixed settings (optimizer on, 200 runs, no IR). */
export function compileToken(): TokenArtifact {
  const source = readFileSync(join(__dirname, TOKEN_SOURCE_NAME), 'utf8');
  const input = {
    language: 'Solidity',
    sources: { [TOKEN_SOURCE_NAME]: { content: source } },
    settings: {
      optimizer: { enabled: true, runs: 200 },
      evmVersion: 'cancun',
      outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input))) as SolcOutput;
  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length > 0) {
    throw new Error(`solc failed:\n${errors.map((e) => e.formattedMessage).join('\n')}`);
  }
  const contract = output.contracts?.[TOKEN_SOURCE_NAME]?.[CONTRACT];
  if (contract === undefined) throw new Error(`solc produced no ${CONTRACT}`);
  return {
    compiler: `solc ${solc.version()}`,
    abi: contract.abi,
    bytecode: `0x${contract.evm.bytecode.object}`,
  };
}

/** The committed artifact, as tests deploy it. */
export function loadTokenArtifact(): TokenArtifact {
  return JSON.parse(readFileSync(ARTIFACT_PATH, 'utf8')) as TokenArtifact;
}

if (require.main === module && process.argv.includes('--write')) {
  writeFileSync(ARTIFACT_PATH, `${JSON.stringify(compileToken(), null, 2)}\n`);
  process.stdout.write(`wrote ${ARTIFACT_PATH}\n`);
}
