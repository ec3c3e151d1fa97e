import { describe, expect, it } from '@jest/globals';

import { AppError } from '../../common/errors';
import {
  authorize,
  callerIdentityOf,
  describeIdentity,
  StateAccess,
  StateRole,
} from './caller-identity';

const cert = (subject: Record<string, string | string[]>): unknown => ({
  subject,
  raw: Buffer.from('x'),
});

// The subject parsing itself: common/certificate-identity.test.ts.
describe('callerIdentityOf', () => {
  it('grants what common/certificate-identity.ts reads', () => {
    expect([...(callerIdentityOf(cert({ CN: 'polychrome-control-plane' }))?.roles ?? [])]).toEqual([
      StateRole.Writer,
    ]);
    const identity = callerIdentityOf(cert({ CN: 'a', O: ['b', 'c'], OU: 'd' }));
    expect(identity && describeIdentity(identity)).toBe('CN=a, O=b, O=c, OU=d');
  });
});

describe('authorize', () => {
  const writer = callerIdentityOf(cert({ CN: 'polychrome-control-plane' }));
  const verifier = callerIdentityOf(cert({ CN: 'polychrome-verifier', O: 'polychrome:verifier' }));
  const stranger = callerIdentityOf(cert({ CN: 'eve' }));

  it('lets a writer read and write, a verifier only read', () => {
    expect(authorize(writer, 'Append', StateAccess.Write)).toBe(writer);
    expect(authorize(writer, 'Read', StateAccess.Read)).toBe(writer);
    expect(authorize(verifier, 'Verify', StateAccess.Read)).toBe(verifier);
  });

  it('refuses a verifier calling Append, naming the identity and the role it needs', () => {
    expect(() => authorize(verifier, 'Append', StateAccess.Write)).toThrow(
      new AppError(
        'permission_denied',
        'caller "CN=polychrome-verifier, O=polychrome:verifier" may not call Append: it needs role ' +
          'polychrome:writer (a certificate with CN polychrome-control-plane, or O or OU polychrome:writer), ' +
          'and its certificate grants polychrome:verifier; issue it a certificate with the right subject',
      ),
    );
  });

  it('refuses an identity without a role even for reads', () => {
    expect(() => authorize(stranger, 'Head', StateAccess.Read)).toThrow(
      /caller "CN=eve" may not call Head/,
    );
  });

  it('refuses a call without a certificate as unauthenticated', () => {
    let caught: unknown;
    try {
      authorize(undefined, 'Head', StateAccess.Read);
    } catch (error) {
      caught = error;
    }
    expect(caught).toMatchObject({ code: 'unauthenticated' });
  });
});
