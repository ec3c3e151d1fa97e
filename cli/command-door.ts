import type { Env } from '../common/config';
import type { ApiClient } from './api-client';
import type { CliIo, ExitCode, parse } from './cli-support';

/*
 * The seam between the conversation commands and the door they reach a conversation
 * through: the public API (public-api-door.ts) or the Kubernetes door (kube-door.ts).
 */

/** A connection to the API plus what printed follow-up commands must repeat. */
export interface ApiConnection {
  readonly client: ApiClient;
  /** `['--api', URL]` when the URL came from the flag, so printed commands work as given. */
  readonly extraFlags: readonly string[];
  /**
   * Reads the journal keys the Conversation's status records (base64 raw keys, in order;
   * none: `[]`) from the Conversation object itself, on a door that can read it (the
   * Kubernetes door). Absent: the door has only the control plane's answer header.
   * @throws ApiCallError, ApiUnreachableError
   */
  readonly statusJournalKeys?: (conversation: string, signal?: AbortSignal) => Promise<string[]>;
  /**
   * The caller's own identity as the door's server reports it, which `--actor` defaults to
   * (the Kubernetes door: `kubectl auth whoami`'s username). Absent: `--actor` is required.
   * @throws ApiCallError, ApiUnreachableError, UsageError
   */
  readonly selfIdentity?: (signal?: AbortSignal) => Promise<string>;
}

/**
 * Where the conversation commands reach a conversation, and how they are called: the public
 * API by uid with a token (`polychrome`), or the Kubernetes door by Conversation name through
 * the kubeconfig (`kubectl polychrome`, cli/kubectl-polychrome.ts). The commands are the same.
 */
export interface CommandDoor {
  /** The words a printed follow-up command starts with. */
  readonly program: readonly string[];
  /** The door's connection flags (every command takes them). */
  readonly options: NonNullable<Parameters<typeof parse>[1]>;
  /** The conversation positional, checked. @throws UsageError */
  conversation(value: string | undefined, command: string): string;
  /** The client, from the flags and the environment. @throws UsageError */
  connect(values: Record<string, unknown>, env: Env | undefined): Promise<ApiConnection>;
  /** The verb that follows the stream, in messages (`stream`, `logs`). */
  readonly streamVerb: string;
  /** What the conversation positional is, in messages (`conversation id`, `Conversation name`). */
  readonly noun: string;
}

/** One conversation command over a door. */
export type DoorCommand = (
  door: CommandDoor,
  args: readonly string[],
  env: Env | undefined,
  io: CliIo,
) => Promise<ExitCode>;
