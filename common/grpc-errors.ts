import { Metadata, type ServiceError } from '@grpc/grpc-js';

import {
  errorCodeFromGrpc,
  errorStatus,
  GrpcStatus,
  isErrorCode,
  type AppError,
  type ErrorCode,
  type ErrorDetails,
} from './errors';

/*
 * How an AppError crosses gRPC, both ways, for every gRPC server and client of the system:
 * the state plane's server and its clients (common/state-client.ts), the harness's server
 * (harness/server/turn-call.ts) and the control plane's harness call
 * (operator/turns/harness-call.ts). Imports nothing from a plane.
 *
 * An error crosses the wire as: the gRPC status from common/errors.ts `errorStatus` (the
 * one table), the AppError's message as the status details, and trailing metadata:
 *
 *   polychrome-error-code     the AppError code (`conflict`, `invalid_argument`, ...)
 *   polychrome-error-details  the AppError's details as JSON (ids, heads, field names)
 *   polychrome-head           when the details carry a head (the state plane's conflicts):
 *                             the partition's current head, decimal
 *
 * The reader takes the code from the metadata when the status agrees with it (so `fenced`
 * comes back as `fenced`, not as the `failed_precondition` its status also stands for),
 * else from the status alone: a status grpc-js made itself (no connection, a refused TLS
 * handshake, a deadline) carries no Polychrome code.
 */

/** Trailing metadata key: the AppError code. */
export const ERROR_CODE_METADATA = 'polychrome-error-code';
/** Trailing metadata key: the AppError details, as JSON. */
export const ERROR_DETAILS_METADATA = 'polychrome-error-details';
/** Trailing metadata key: the partition's current head (the state plane's conflicts). */
export const HEAD_METADATA = 'polychrome-head';

/** Longest details JSON sent; larger details are dropped (the message still says it all). */
const MAX_DETAILS_JSON = 4096;

/** What a gRPC server hands to a call's callback or emits on a stream to end it. */
export interface GrpcErrorStatus {
  readonly code: number;
  readonly details: string;
  readonly metadata: Metadata;
}

/**
 * The status a server sends for `error`: the code from `errorStatus`, the message written
 * for users, and the contract's trailing metadata. Never carries a stack or a cause.
 */
export function grpcStatusOf(error: AppError): GrpcErrorStatus {
  const metadata = new Metadata();
  metadata.set(ERROR_CODE_METADATA, error.code);
  const details = JSON.stringify(error.details);
  if (details.length <= MAX_DETAILS_JSON) metadata.set(ERROR_DETAILS_METADATA, details);
  const head = error.details.head;
  if (typeof head === 'number' && Number.isSafeInteger(head) && head >= 0) {
    metadata.set(HEAD_METADATA, String(head));
  }
  return { code: errorStatus[error.code].grpc, details: error.message, metadata };
}

/**
 * {@link grpcStatusOf} as the Error grpc-js takes: a unary callback's first argument, or
 * what a streaming handler emits as `'error'` to end the call with that status.
 */
export function grpcErrorOf(error: AppError): Error & GrpcErrorStatus {
  return Object.assign(new Error(error.message), grpcStatusOf(error));
}

/** True for a grpc-js `ServiceError` (what a failed call reports). */
export function isServiceError(value: unknown): value is ServiceError {
  return (
    value instanceof Error &&
    'code' in value &&
    typeof value.code === 'number' &&
    'metadata' in value &&
    value.metadata instanceof Metadata
  );
}

/** A failed call's status, read back into the parts of an AppError. */
export interface ReceivedError {
  readonly code: ErrorCode;
  /** The status details: the peer's AppError message, or grpc-js's own text. */
  readonly message: string;
  /** The peer's details; empty for a status without a Polychrome code. */
  readonly details: ErrorDetails;
  readonly grpcStatus: number;
  /**
   * True when the peer answered with a Polychrome error code (its metadata), false for a
   * status grpc-js made itself (no connection, a refused handshake, a deadline).
   */
  readonly fromServer: boolean;
  /** The `polychrome-head` the peer sent, when it is a safe integer. */
  readonly head: number | undefined;
}

/**
 * Reads a failed call's status: the code, details and head from the metadata when the
 * peer sent a Polychrome code its status agrees with, else the code for the bare status
 * (`errorCodeFromGrpc`) and no details.
 */
export function receivedErrorOf(error: ServiceError): ReceivedError {
  const declared = firstString(error.metadata, ERROR_CODE_METADATA);
  const status: number = error.code;
  const fromServer = isErrorCode(declared) && errorStatus[declared].grpc === status;
  const headText = firstString(error.metadata, HEAD_METADATA);
  const head = headText === undefined ? Number.NaN : Number(headText);
  return {
    code: fromServer ? declared : errorCodeFromGrpc(status),
    message: error.details,
    details: fromServer ? parseDetails(firstString(error.metadata, ERROR_DETAILS_METADATA)) : {},
    grpcStatus: status,
    fromServer,
    head: fromServer && Number.isSafeInteger(head) ? head : undefined,
  };
}

const statusNames = new Map<number, string>(
  Object.entries(GrpcStatus).map(([name, code]): [number, string] => [code, name]),
);

/** The gRPC status name for a number (`ABORTED`), for a metrics label; `UNKNOWN` if none. */
export function grpcStatusName(code: number): string {
  return statusNames.get(code) ?? 'UNKNOWN';
}

function firstString(metadata: Metadata, key: string): string | undefined {
  const [value] = metadata.get(key);
  return typeof value === 'string' ? value : undefined;
}

function parseDetails(text: string | undefined): ErrorDetails {
  if (text === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return {};
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return {};
  const out: Record<string, string | number | boolean | null> = {};
  const entries: [string, unknown][] = Object.entries(value);
  for (const [key, field] of entries) {
    if (
      field === null ||
      typeof field === 'string' ||
      typeof field === 'number' ||
      typeof field === 'boolean'
    ) {
      out[key] = field;
    }
  }
  return out;
}
