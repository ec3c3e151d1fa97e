import { describe, expect, it } from '@jest/globals';

import { personaFromProto, sessionFromProto } from './records-from-proto';
import { isPersonaRole } from './records-types';

describe('fromProto', () => {
  it('keeps the roles this client knows and drops the others', () => {
    expect(isPersonaRole('admin')).toBe(true);
    expect(isPersonaRole('owner')).toBe(false);
    const persona = personaFromProto({
      id: 'p1',
      displayName: 'Ada',
      identities: ['email:ada@example.com'],
      roles: ['admin', 'owner', 'member'],
      version: 4,
      createdAtMs: 1,
      updatedAtMs: 2,
    });
    expect(persona.roles).toEqual(['admin', 'member']);
  });

  it('reads an absent revocation time as not revoked', () => {
    const base = { id: 's1', personaId: 'p1', createdAtMs: 1, expiresAtMs: 2, mintedBy: '' };
    expect(sessionFromProto(base).revokedAtMs).toBeUndefined();
    expect(sessionFromProto({ ...base, revokedAtMs: 0 }).revokedAtMs).toBe(0);
  });
});
