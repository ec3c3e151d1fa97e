import { describe, expect, it } from '@jest/globals';

import { CertificateRole } from '../../common/certificate-identity';
import { BackupService } from '../../proto/gen/polychrome/state/v1/backup';
import { RecordsService } from '../../proto/gen/polychrome/state/v1/records';
import { JournalService } from '../../proto/gen/polychrome/state/v1/state';
import { rolesFor, RPC_ROLES, StateService } from './rpc-roles';

/** Every RPC the generated service definitions serve, as `service/method`. */
function servedRpcs(): string[] {
  return [
    ...Object.values(JournalService),
    ...Object.values(RecordsService),
    ...Object.values(BackupService),
  ].map((d) => d.path.slice(1));
}

function tableRpcs(): string[] {
  return Object.entries(RPC_ROLES).flatMap(([service, methods]) =>
    Object.keys(methods).map((method) => `${service}/${method}`),
  );
}

describe('RPC_ROLES', () => {
  it('names every RPC of the Journal, Records and Backup services, and nothing else', () => {
    expect(tableRpcs().sort()).toEqual(servedRpcs().sort());
  });

  it.each(servedRpcs())('gives %s at least one role', (rpc) => {
    const [service = '', method = ''] = rpc.split('/');
    expect(rolesFor(service, method).length).toBeGreaterThan(0);
  });

  it('gives nobody a method or service it does not name', () => {
    expect(rolesFor(StateService.Journal, 'Truncate')).toEqual([]);
    expect(rolesFor('polychrome.state.v1.Other', 'Append')).toEqual([]);
    expect(rolesFor(StateService.Journal, 'toString')).toEqual([]);
    expect(rolesFor('__proto__', 'Append')).toEqual([]);
  });

  it('grants the peer-port replica role nothing on the state plane', () => {
    for (const rpc of servedRpcs()) {
      const [service = '', method = ''] = rpc.split('/');
      expect(rolesFor(service, method)).not.toContain(CertificateRole.ControlPlaneReplica);
    }
  });

  it('gives the backup, which reads every journal and record at once, to the backup role alone', () => {
    expect(rolesFor(StateService.Backup, 'Take')).toEqual([CertificateRole.Backup]);
  });

  it('keeps repair and the records administration away from the writer', () => {
    expect(rolesFor(StateService.Journal, 'Repair')).toEqual([CertificateRole.Repair]);
    expect(rolesFor(StateService.Journal, 'Erase')).toEqual([CertificateRole.Erase]);
    for (const method of ['SetRoles', 'CreateSession', 'Authenticate']) {
      expect(rolesFor(StateService.Records, method)).toContain(CertificateRole.RecordsAdmin);
    }
    for (const method of [
      'RevealCredential',
      'DeletePersona',
      'ListSessions',
      'ListPersonas',
      'LinkIdentity',
      'CompleteCeremony',
    ]) {
      expect(rolesFor(StateService.Records, method)).toEqual([CertificateRole.RecordsAdmin]);
    }
  });
});
