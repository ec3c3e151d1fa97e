/**
 * The state plane's records: personas, sessions, credentials and ceremonies (README.md in
 * this folder). The gRPC server builds one {@link RecordStore} on the state database.
 */
export { RecordStore, type RecordStoreOptions } from './record-store';
export { RECORDS_SUBLEVEL, type RecordsParent } from './record-db';
export {
  deriveRecordsKey,
  loadRecordsKey,
  RECORDS_KEY_BYTES,
  type RecordsKey,
} from './records-key';
export { CeremonyKind, CeremonyState, Role } from './record-schemas';
export {
  MAX_IDENTITIES_PER_PERSONA,
  PersonaRecords,
  type ChangeOptions,
  type NewPersona,
  type Persona,
} from './persona-records';
export {
  DEFAULT_SESSION_TTL_MS,
  MAX_SESSION_TTL_MS,
  SessionRecords,
  type Authenticated,
  type Session,
} from './session-records';
export {
  CredentialRecords,
  MAX_CREDENTIAL_SECRET_BYTES,
  type Credential,
  type NewCredential,
} from './credential-records';
export {
  CeremonyRecords,
  DEFAULT_CEREMONY_MAX_ATTEMPTS,
  DEFAULT_CEREMONY_TTL_MS,
  MAX_CEREMONY_ATTEMPTS,
  MAX_CEREMONY_TTL_MS,
  type Ceremony,
  type NewCeremony,
} from './ceremony-records';
