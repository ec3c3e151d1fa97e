import { describe, expect, it } from '@jest/globals';

import { kubernetesIdentityOf } from './identity';
import { grantedRoles, isServiceAccountIdentity, Role } from './persona-roles';

const DESK = kubernetesIdentityOf('system:serviceaccount:team:desk');

describe('isServiceAccountIdentity', () => {
  it.each([
    [DESK, true],
    [DESK.replace(/%3A/gu, '%3a'), true],
    [kubernetesIdentityOf('alice'), false],
    [kubernetesIdentityOf('system:serviceaccounts:team'), false],
    ['bot:system%3Aserviceaccount%3Ateam%3Adesk', false],
    ['email:ada@example.com', false],
  ])('%s is a ServiceAccount: %s', (identity, expected) => {
    expect(isServiceAccountIdentity(identity)).toBe(expected);
  });
});

describe('grantedRoles', () => {
  it('drops admin when any identity is a ServiceAccount, keeps the rest', () => {
    expect(grantedRoles(['email:ada', DESK], [Role.Admin, Role.Edge])).toEqual([Role.Edge]);
  });

  it('keeps every role of a persona without a ServiceAccount', () => {
    expect(grantedRoles(['email:ada'], [Role.Admin, Role.Member])).toEqual([
      Role.Admin,
      Role.Member,
    ]);
  });
});
