/**
 * `status` of a Conversation (written by the operator's lease holder only), declared once
 * with the schema builder: the CRD's schema is `conversationStatusField.schema`, and the
 * TypeScript types below are inferred from the same declarations.
 */
import { MAX_RECORDED_JOURNAL_KEYS } from '../../../common/journal-keys';
import { ConditionStatus, ConversationPhase } from './conditions';
import { TurnState } from './conversation-values';
import {
  CONDITION_REASON_PATTERN,
  CONDITION_TYPE_PATTERN,
  ED25519_BASE64_PATTERN,
  KEY_ID_PATTERN,
  SHA256_HEX_PATTERN,
} from './field-patterns';
import type { Infer } from './schema-builder';
import { enumOf, integer, list, object, required, string } from './schema-builder';

/** One `status.conditions` item: the shape of `metav1.Condition`. */
export const conditionField = object(
  {
    type: required(
      string({
        description: 'Condition type: Ready, Progressing or Degraded.',
        maxLength: 316,
        pattern: CONDITION_TYPE_PATTERN,
      }),
    ),
    status: required(enumOf(ConditionStatus, { description: 'True, False or Unknown.' })),
    observedGeneration: integer({
      description: 'metadata.generation the condition was set for.',
      format: 'int64',
      minimum: 0,
    }),
    lastTransitionTime: required(
      string({
        description: 'When status last changed.',
        format: 'date-time',
        maxLength: 64,
      }),
    ),
    reason: required(
      string({
        description: 'PascalCase cause, e.g. TurnRunning.',
        minLength: 1,
        maxLength: 1024,
        pattern: CONDITION_REASON_PATTERN,
      }),
    ),
    message: required(string({ description: 'Details for people.', maxLength: 32768 })),
  },
  { description: 'A condition (metav1.Condition).' },
);

/** `status`. */
export const conversationStatusField = object(
  {
    phase: enumOf(ConversationPhase, { description: 'Display value derived from conditions.' }),
    conditions: list(conditionField, {
      description: 'Ready, Progressing and Degraded.',
      maxItems: 16,
      listType: 'map',
      listMapKeys: ['type'],
    }),
    observedGeneration: integer({
      description: 'metadata.generation of the last clean reconcile.',
      format: 'int64',
      minimum: 0,
    }),
    lastTurnTime: string({
      description: 'When the last turn started; the idle timer counts from here.',
      format: 'date-time',
      maxLength: 64,
    }),
    closedTime: string({
      description: 'When the conversation was last fully closed; retention counts from here.',
      format: 'date-time',
      maxLength: 64,
    }),
    agent: string({
      description:
        "For a Conversation that names an Agent: the agent that answers the next turn, the one the last completed turn ended with (a handoff's target stays until it hands off in turn). Empty until a turn completes.",
      maxLength: 63,
    }),
    currentTurn: string({
      description:
        'Id of the turn in flight, if any (the same as turns.current.turnId, kept for older readers).',
      maxLength: 128,
    }),
    turns: object(
      {
        current: object(
          {
            turnId: required(string({ description: 'Id of the turn.', maxLength: 128 })),
            state: required(
              enumOf(TurnState, {
                description: 'running, awaiting_approval or awaiting_answer.',
              }),
            ),
            requestId: string({
              description: 'The approval or question the turn waits for.',
              maxLength: 128,
            }),
          },
          { description: 'The turn in flight; absent when none is.' },
        ),
        quarantined: object(
          {
            turnId: required(string({ description: 'Id of the turn.', maxLength: 128 })),
            toolCallId: string({
              description: 'The side-effecting tool call whose outcome is unknown, if any.',
              maxLength: 128,
            }),
            reason: required(string({ description: 'Why it was quarantined.', maxLength: 4096 })),
            since: required(
              string({
                description: 'When it was quarantined.',
                format: 'date-time',
                maxLength: 64,
              }),
            ),
          },
          {
            description:
              'The last quarantined turn: Degraded TurnAmbiguous while set. Cleared when an admin resolves the turn (polychrome conversation resolve; docs/turns.md).',
          },
        ),
      },
      {
        description:
          'What the turn code reports about turns; conditions and phase are derived from it.',
      },
    ),
    sandbox: object(
      {
        claimName: string({ description: 'SandboxClaim name.', maxLength: 253 }),
        sandboxName: string({ description: 'Sandbox name.', maxLength: 253 }),
        podName: string({ description: 'Harness pod name.', maxLength: 253 }),
        endpoint: string({ description: 'Harness address, host:port.', maxLength: 512 }),
      },
      { description: 'The sandbox the conversation runs in now.' },
    ),
    journal: object(
      {
        head: integer({
          description: 'Number of committed journal entries.',
          format: 'int64',
          minimum: 0,
        }),
        lastSignedRoot: string({
          description: 'Last signed MMR root, lower-case hex SHA-256.',
          maxLength: 64,
          pattern: SHA256_HEX_PATTERN,
        }),
        keyId: string({ description: 'Id of the key that signed it.', maxLength: 128 }),
        publicKeys: list(
          object(
            {
              keyId: required(
                string({
                  description: 'Key id: the first 16 bytes of the SHA-256 of the key, hex.',
                  maxLength: 32,
                  pattern: KEY_ID_PATTERN,
                }),
              ),
              publicKey: required(
                string({
                  description: 'The raw 32-byte ed25519 public key, base64.',
                  maxLength: 44,
                  pattern: ED25519_BASE64_PATTERN,
                }),
              ),
            },
            { description: 'One journal signing key.' },
          ),
          {
            description:
              "The state plane's journal signing keys this conversation's journal was seen " +
              'signed with: first the key that signed its first root (recorded when the control ' +
              'plane first recorded the journal), then keys handed over to by key_rotated events ' +
              'signed by a recorded key, newest last; at most 4 (the first and the newest). ' +
              'Verifiers pin them (polychrome conversation verify; docs/replay.md).',
            maxItems: MAX_RECORDED_JOURNAL_KEYS,
          },
        ),
        rollback: object(
          {
            checkpointHead: required(
              integer({
                description: 'The head the checkpoint (or this control plane) had recorded.',
                format: 'int64',
                minimum: 0,
              }),
            ),
            checkpointRoot: required(
              string({
                description: 'The signed root recorded at that head, lower-case hex SHA-256.',
                maxLength: 64,
                pattern: SHA256_HEX_PATTERN,
              }),
            ),
            journalHead: required(
              integer({
                description: "The state plane's head when the rollback was found.",
                format: 'int64',
                minimum: 0,
              }),
            ),
            journalRoot: string({
              description:
                "The state plane's signed root at checkpointHead, when it has one (lower-case hex SHA-256); absent when the journal is shorter.",
              maxLength: 64,
              pattern: SHA256_HEX_PATTERN,
            }),
            since: required(
              string({
                description: 'When the control plane found it.',
                format: 'date-time',
                maxLength: 64,
              }),
            ),
          },
          {
            description:
              "Set while the state plane holds a journal shorter than head, or different at it: Degraded JournalRolledBack, and no turn is appended. Cleared when the journal is restored, or by an admin's recorded decision (polychrome conversation accept-rollback; docs/turns.md).",
          },
        ),
      },
      { description: 'Journal position and integrity.' },
    ),
  },
  { description: 'Observed state, written by the operator.' },
);

/** Observed state of a Conversation. */
export type ConversationStatus = Infer<typeof conversationStatusField>;
/**
 * `status.journal.rollback`: the state plane's journal no longer holds the checkpoint
 * (operator/turns/journal-checkpoint.ts). Degraded JournalRolledBack while set.
 */
export type JournalRollback = NonNullable<NonNullable<ConversationStatus['journal']>['rollback']>;
/** One status condition (`metav1.Condition`). */
export type Condition = Infer<typeof conditionField>;
