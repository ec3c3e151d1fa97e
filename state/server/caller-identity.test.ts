import { describe, expect, it } from '@jest/globals';

import { AppError } from '../../common/errors';
import { authorize, callerIdentityOf, describeIdentity, StateRole } from './caller-identity';

const cert = (subject: Record<string, string | string[]>): unknown => ({
  subject,
  raw: Buffer.from('x'),
});

// The subject parsing itself: common/certificate-identity.test.ts; the table: rpc-roles.test.ts.
describe('callerIdentityOf', () => {
  it('grants what common/certificate-identity.ts reads', () => {
    expect([...(callerIdentityOf(cert({ CN: 'w', O: 'polychrome:writer' }))?.roles ?? [])]).toEqual(
      [StateRole.Writer],
    );
    const identity = callerIdentityOf(cert({ CN: 'a', O: ['b', 'c'], OU: 'd' }));
    expect(identity && describeIdentity(identity)).toBe('CN=a, O=b, O=c, OU=d');
  });
});

describe('authorize', () => {
  const writer = callerIdentityOf(cert({ CN: 'polychrome-control-plane', O: 'polychrome:writer' }));
  const verifier = callerIdentityOf(cert({ CN: 'polychrome-verifier', O: 'polychrome:verifier' }));
  const stranger = callerIdentityOf(cert({ CN: 'eve' }));

  it('lets a caller holding one of the roles through', () => {
    expect(authorize(writer, 'Append', [StateRole.Writer])).toBe(writer);
    expect(authorize(verifier, 'Read', [StateRole.Writer, StateRole.Verifier])).toBe(verifier);
  });

  it('refuses a caller without the role, naming the method, the role needed and the roles held', () => {
    expect(() => authorize(verifier, 'Append', [StateRole.Writer])).toThrow(
      new AppError(
        'permission_denied',
        'caller "CN=polychrome-verifier, O=polychrome:verifier" may not call Append: it needs role ' +
          "polychrome:writer (in the certificate's O or OU), and its certificate holds " +
          'polychrome:verifier; use a certificate issued with that role',
      ),
    );
  });

  it('refuses an identity without a role, and a method nobody may call', () => {
    expect(() => authorize(stranger, 'Head', [StateRole.Verifier])).toThrow(
      /caller "CN=eve" may not call Head: .* holds no Polychrome role/,
    );
    expect(() => authorize(writer, 'Unlisted', [])).toThrow(/no entry in the role table/);
  });

  it('refuses a call without a certificate as unauthenticated', () => {
    let caught: unknown;
    try {
      authorize(undefined, 'Head', [StateRole.Verifier]);
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({ code: 'unauthenticated' });
  });
});
