import type { z } from 'zod';
import { AppError } from '../common/errors';
import { parseIdentity } from '../common/identity';
import type { ApiClient } from './api-client';
import type { Parsed } from './api-answers';
import { stringValue, UsageError, type Format } from './cli-support';
import type { ApiConnection } from './command-door';
import type { ApiTarget } from './transport';

/*
 * What a forensic command is asked (conversation-forensics.ts): the request every core
 * takes, and the flags that make it, each read before anything is fetched so a mistake is
 * a usage error (exit 2).
 */

/** What a conversation core needs besides its client. */
export interface ForensicRequest {
  readonly conversationId: string;
  readonly actor: string;
  readonly format: Format;
  readonly signal?: AbortSignal;
}

/** The form `--actor` takes, for usage errors. */
export const ACTOR_FORMAT = 'provider:scope:external_id or provider:external_id';

/**
 * `--actor`: one of the caller's own identities, in the canonical form.
 * @throws UsageError when absent or not an identity, showing the format.
 */
export function parseActorFlag(value: unknown): string {
  const text = stringValue(value);
  if (text === undefined) {
    throw new UsageError(
      `--actor is required: the admin identity you act as (${ACTOR_FORMAT}, one of your own)`,
    );
  }
  try {
    parseIdentity(text);
  } catch (error) {
    throw new UsageError(
      `--actor ${JSON.stringify(text.slice(0, 80))} is not an identity: expected ${ACTOR_FORMAT} ` +
        `(${error instanceof AppError ? error.message : String(error)})`,
    );
  }
  return text;
}

/**
 * `--actor` if given (checked by `parseActorFlag` when the flags were read), else the
 * caller's own identity from the door, where it can tell (the Kubernetes door).
 * @throws UsageError when neither; what `selfIdentity` throws
 */
export async function actorOrSelf(
  given: string | undefined,
  connection: ApiConnection,
  signal?: AbortSignal,
): Promise<string> {
  if (given !== undefined) return given;
  if (connection.selfIdentity === undefined) return parseActorFlag(undefined);
  return connection.selfIdentity(signal);
}

/** How an admin settles a quarantined turn, as `conversation resolve` reads it. */
export type ResolveFlags =
  | { readonly decision: 'did_not_run' }
  | {
      readonly decision: 'ran';
      readonly resultFile: string | undefined;
      /** The transaction that paid a turn quarantined on a payment (docs/payments.md). */
      readonly transaction?: string;
    };

/**
 * `--ran [--result FILE | --transaction HASH]` or `--did-not-run`: exactly one; `--result` and `--transaction` go with `--ran`
 * only (without it the result is unknown).
 * @throws UsageError naming the mistake.
 */
export function parseResolveFlags(values: Readonly<Record<string, unknown>>): ResolveFlags {
  const ran = values.ran === true;
  const didNotRun = values['did-not-run'] === true;
  const resultFile = stringValue(values.result);
  const transaction = stringValue(values.transaction);
  if (ran === didNotRun) {
    throw new UsageError(
      `conversation resolve takes exactly one of --ran (the call ran; --result FILE gives its result) and --did-not-run (it did not; the turn runs it again)${ran ? ', not both' : ''}`,
    );
  }
  if (didNotRun) {
    if (resultFile !== undefined || transaction !== undefined) {
      throw new UsageError(
        `--${resultFile === undefined ? 'transaction' : 'result'} goes with --ran only: a call that did not run has no result; leave it out`,
      );
    }
    return { decision: 'did_not_run' };
  }
  if (transaction !== undefined) {
    if (resultFile !== undefined) {
      throw new UsageError(
        '--transaction and --result do not go together: a payment resolved with its transaction has no result to give',
      );
    }
    return { decision: 'ran', resultFile, transaction };
  }
  return { decision: 'ran', resultFile };
}

/** `--head N --reason TEXT` of `accept-rollback`, both required. @throws UsageError */
export function parseAcceptRollbackFlags(values: Readonly<Record<string, unknown>>): {
  head: number;
  reason: string;
} {
  const headText = stringValue(values.head);
  const reason = stringValue(values.reason);
  if (
    headText === undefined ||
    !/^\d+$/u.test(headText) ||
    !Number.isSafeInteger(Number(headText))
  ) {
    throw new UsageError(
      `accept-rollback takes --head N: the journal head you accept (status.journal.rollback.journalHead)${headText === undefined ? '' : `, got ${JSON.stringify(headText.slice(0, 40))}`}`,
    );
  }
  if (reason === undefined || reason.trim() === '') {
    throw new UsageError(
      'accept-rollback takes --reason TEXT: why the lost entries are accepted (it is recorded in the journal)',
    );
  }
  return { head: Number(headText), reason };
}

/** The flags of `resolve`. */
export const RESOLVE_OPTIONS = {
  ran: { type: 'boolean' },
  'did-not-run': { type: 'boolean' },
  result: { type: 'string' },
  transaction: { type: 'string' },
} as const;

/** A payment policy resource's two answers: the policy a GET reads, what a PUT answers. */
export interface PolicyAnswers<G extends z.ZodType, P extends z.ZodType> {
  readonly read: { readonly schema: G; readonly what: string };
  readonly set: { readonly schema: P; readonly what: string };
}

/**
 * Reads the payment policy at `target` (no `change`: GET with `?actor=`) or sets it (PUT of
 * `{actor, ...change}`), acting as `actor`: a conversation's (`payments`) or a persona's
 * (`personas payment-policy`).
 */
export function readOrSetPolicy<G extends z.ZodType, P extends z.ZodType>(
  client: ApiClient,
  target: ApiTarget,
  request: { readonly actor: string; readonly change: object | undefined },
  answers: PolicyAnswers<G, P>,
  signal: AbortSignal | undefined,
): Promise<Parsed<z.output<G>> | Parsed<z.output<P>>> {
  const { actor, change } = request;
  return change === undefined
    ? client.exchange(
        'GET',
        { ...target, query: { actor } },
        undefined,
        answers.read.schema,
        answers.read.what,
        signal,
      )
    : client.exchange(
        'PUT',
        target,
        { actor, ...change },
        answers.set.schema,
        answers.set.what,
        signal,
      );
}
