import { CertificateRole } from '../../common/certificate-identity';
import type { BackupService } from '../../proto/gen/polychrome/state/v1/backup';
import type { RecordsService } from '../../proto/gen/polychrome/state/v1/records';
import type { JournalService } from '../../proto/gen/polychrome/state/v1/state';

/*
 * Which certificate roles may call each state-plane RPC: the one table every handler
 * consults (call-handlers.ts looks the method up when the handler is made, and a method
 * without an entry does not compile, and would refuse every call if it did). A caller
 * needs one of the roles listed. Deny by default: a role not listed for a method, and a
 * certificate without any role, is refused. docs/state-plane.md, "Identities and roles",
 * says who carries which role and why.
 */

const { Writer, Verifier, Repair, RecordsAdmin, Retire, Erase, Backup } = CertificateRole;

/** The method name (`Append`) of each RPC in a ts-proto service definition. */
type MethodsOf<Service> = {
  [K in keyof Service]: Service[K] extends { path: `/${string}/${infer Method}` } ? Method : never;
}[keyof Service];

/** The state plane's gRPC services, by their full names. */
export const StateService = {
  Journal: 'polychrome.state.v1.Journal',
  Records: 'polychrome.state.v1.Records',
  Backup: 'polychrome.state.v1.Backup',
} as const;
export type StateService = (typeof StateService)[keyof typeof StateService];

/** The methods of each service, as its .proto file names them. */
export interface StateServiceMethods {
  readonly [StateService.Journal]: MethodsOf<typeof JournalService>;
  readonly [StateService.Records]: MethodsOf<typeof RecordsService>;
  readonly [StateService.Backup]: MethodsOf<typeof BackupService>;
}

/** The Records service's method names. */
export type RecordsMethod = StateServiceMethods[typeof StateService.Records];

/** The roles that may call each method; the keys must be exactly the service's RPCs. */
type RoleTable = {
  readonly [S in StateService]: Readonly<
    Record<StateServiceMethods[S], readonly CertificateRole[]>
  >;
};

/** The records RPCs the control plane's own code calls (see the docs for which path). */
const CONTROL_PLANE_RECORDS = [Writer, RecordsAdmin] as const;

export const RPC_ROLES: RoleTable = {
  [StateService.Journal]: {
    // Turns append and read; the public API follows; forensics and journal keys export.
    Append: [Writer],
    Read: [Writer, Verifier],
    Head: [Writer, Verifier],
    Export: [Writer, Verifier],
    // Only verification tooling uses these; the control plane never does.
    Proof: [Verifier],
    Verify: [Verifier],
    ListPartitions: [Verifier],
    // Rewrites entries: only a certificate that names the repair role.
    Repair: [Repair],
    // Journal retention: removes a deleted conversation's events; only the retire role.
    Retire: [Retire],
    GetRetirement: [Verifier],
    // ---- erasure ----
    // Erases readable content: only a certificate that names the erase role.
    Erase: [Erase],
    // A person's memory clear erases only the memory_set entries of the cleared key (the
    // store checks each), so the writer that appends turns may ask for it.
    ClearMemory: [Writer],
  },
  [StateService.Records]: {
    // The public API authenticates bearer tokens.
    Authenticate: CONTROL_PLANE_RECORDS,
    // The kube door mints and revokes sessions (operator/kube-api/kube-sessions.ts) and
    // looks up ServiceAccount personas (service-account-tokens.ts); main.ts finds admins.
    FindPersonaByIdentity: CONTROL_PLANE_RECORDS,
    CreatePersona: CONTROL_PLANE_RECORDS,
    SetRoles: CONTROL_PLANE_RECORDS,
    // An admin's persona payment policy (public API) and the turn path's persona totals.
    SetPersonaPaymentPolicy: CONTROL_PLANE_RECORDS,
    GetPersonaPaymentPolicy: CONTROL_PLANE_RECORDS,
    RecordPersonaSpend: CONTROL_PLANE_RECORDS,
    ListPersonaSpends: CONTROL_PLANE_RECORDS,
    CreateSession: CONTROL_PLANE_RECORDS,
    RevokeSession: CONTROL_PLANE_RECORDS,
    // Nothing in the control plane calls these: records administration only.
    GetPersona: [RecordsAdmin],
    ListPersonas: [RecordsAdmin],
    LinkIdentity: [RecordsAdmin],
    UnlinkIdentity: [RecordsAdmin],
    RenamePersona: [RecordsAdmin],
    DeletePersona: [RecordsAdmin],
    GetSession: [RecordsAdmin],
    ListSessions: [RecordsAdmin],
    CreateCredential: [RecordsAdmin],
    GetCredential: [RecordsAdmin],
    RevealCredential: [RecordsAdmin],
    ListCredentials: [RecordsAdmin],
    DeleteCredential: [RecordsAdmin],
    StartCeremony: [RecordsAdmin],
    CompleteCeremony: [RecordsAdmin],
    GetCeremony: [RecordsAdmin],
    ListCeremonies: [RecordsAdmin],
  },
  [StateService.Backup]: {
    // Every journal and every record (sealed credentials included) in one stream: only a
    // certificate that names the backup role; the control plane's does not.
    Take: [Backup],
  },
};

/**
 * The roles that may call `method` of `service`; empty (nobody) for a method the table
 * does not name, so a handler added without an entry refuses every call.
 */
export function rolesFor(service: string, method: string): readonly CertificateRole[] {
  if (!Object.hasOwn(RPC_ROLES, service)) return [];
  const methods: Readonly<Record<string, readonly CertificateRole[]>> =
    RPC_ROLES[service as StateService];
  return Object.hasOwn(methods, method) ? (methods[method] ?? []) : [];
}
