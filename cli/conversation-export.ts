import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { ApiClient } from './api-client';
import { ApiCallError } from './api-errors';
import { ExitCode, write, type CliIo } from './cli-support';
import type { ApiConnection } from './command-door';
import type { ForensicRequest } from './forensic-request';
import { StatusKeysFrom, type StatusKeys } from './journal-key-pin';

/*
 * The conversation's journal export through the control plane (admins; docs/replay.md):
 * `export` writes it out; `conversation verify` and `replay` check it on this machine from
 * a private temporary file, with the journal keys the Conversation's status recorded.
 */

/**
 * `export`: the conversation's journal export file (the format of `polychrome state
 * export`, docs/journal-format.md), to stdout or `--file F`; the control plane's
 * checkpoint for it goes to stderr, to pass to `journal verify --checkpoint`.
 */
export async function exportConversation(
  client: ApiClient,
  request: ForensicRequest & { readonly file?: string },
  io: CliIo,
): Promise<ExitCode> {
  const exported = await client.exportJournal(
    request.conversationId,
    request.actor,
    request.signal,
  );
  if (request.file === undefined || request.file === '-') {
    await write(io.stdout, exported.text);
  } else {
    await writeFile(request.file, exported.text, { mode: 0o600 });
  }
  const lines = exported.text.split('\n').filter((l) => l !== '').length;
  await write(
    io.stderr,
    `conversation ${request.conversationId}: exported ${String(Math.max(0, lines - 1))} events` +
      (request.file === undefined || request.file === '-' ? '' : ` to ${request.file}`) +
      (exported.checkpoint === undefined ? '' : `; checkpoint ${exported.checkpoint}`) +
      '\n',
  );
  return ExitCode.Ok;
}

/** What the control plane sent beside the export: its answer headers, as they came. */
export interface ExportSidecar {
  readonly checkpoint: string | undefined;
  readonly publicKeys: string | undefined;
}

/** The conversation's export in a private temporary file, removed after `use`. */
export async function withExport<T>(
  client: ApiClient,
  request: ForensicRequest,
  use: (file: string, sidecar: ExportSidecar) => Promise<T>,
): Promise<T> {
  const exported = await client.exportJournal(
    request.conversationId,
    request.actor,
    request.signal,
  );
  const dir = await mkdtemp(join(tmpdir(), 'polychrome-export-'));
  try {
    const file = join(dir, 'journal.ndjson');
    await writeFile(file, exported.text, { mode: 0o600 });
    return await use(file, { checkpoint: exported.checkpoint, publicKeys: exported.publicKeys });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The journal-key options of `conversation verify` and `replay`. */
export interface KeyOptions {
  /** `--public-key`: the journal keys to trust, instead of those the status recorded. */
  readonly publicKeys?: readonly Uint8Array[];
  /** Reads the status's keys from the Conversation object (ApiConnection.statusJournalKeys). */
  readonly statusJournalKeys?: ApiConnection['statusJournalKeys'];
}

/**
 * The status's keys read from the Conversation object, before the export is fetched (so
 * the export holds at least the batches they signed). Undefined, so the keys the control
 * plane sends with the export are used, when keys were pinned with `--public-key`, the
 * door cannot read the object (the public API; a caller without `get conversations`), or
 * the object records none: both are the same status, the object read directly.
 */
export async function statusKeysOfObject(
  request: ForensicRequest,
  options: KeyOptions,
): Promise<StatusKeys | undefined> {
  const read = options.statusJournalKeys;
  if (read === undefined || (options.publicKeys ?? []).length > 0) return undefined;
  let keys: string[];
  try {
    keys = await read(request.conversationId, request.signal);
  } catch (error) {
    if (error instanceof ApiCallError) return undefined;
    throw error;
  }
  return keys.length === 0 ? undefined : { keys: keys.join(','), from: StatusKeysFrom.Object };
}
