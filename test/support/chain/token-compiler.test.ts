import { describe, expect, it } from '@jest/globals';
import { compileToken, loadTokenArtifact } from './token-compiler';

describe('the committed EIP-3009 token artifact', () => {
  it('is exactly what the pinned solc builds from Eip3009Token.sol', () => {
    const built = compileToken();
    const committed = loadTokenArtifact();
    expect(built.compiler).toBe(committed.compiler);
    expect(built.abi).toEqual(committed.abi);
    expect(built.bytecode).toBe(committed.bytecode);
  }, 60_000);

  it('exposes the EIP-3009 surface the x402 facilitator calls', () => {
    const names = loadTokenArtifact().abi.map((entry) => (entry as { name?: string }).name);
    for (const name of [
      'transferWithAuthorization',
      'receiveWithAuthorization',
      'authorizationState',
      'name',
      'version',
      'decimals',
      'balanceOf',
      'AuthorizationUsed',
      'Transfer',
    ]) {
      expect(names).toContain(name);
    }
  });
});
