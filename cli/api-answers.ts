import { z } from 'zod';

/*
 * The answers of the public API the CLI reads (docs/api/openapi.json), as zod schemas:
 * unknown fields are kept, so `--format json` prints the body as the API sent it.
 */

const cardSchema = {
  approval: z.looseObject({
    requestId: z.string(),
    toolCallId: z.string(),
    toolName: z.string(),
    args: z.unknown(),
    argsSha256: z.string(),
    reason: z.string(),
    requiredApprover: z.string(),
    agent: z.string().optional(),
    thread: z.string().optional(),
  }),
  question: z.looseObject({
    requestId: z.string(),
    question: z.string(),
    agent: z.string().optional(),
    thread: z.string().optional(),
  }),
  ambiguous: z.looseObject({ toolCallId: z.string(), reason: z.string() }),
  handoff: z.looseObject({ targetAgent: z.string(), reason: z.string() }),
};

const turnStatusSchema = z.enum(['complete', 'paused', 'ambiguous', 'handoff']);

export const turnReplySchema = z.looseObject({
  conversationId: z.string(),
  turnId: z.string(),
  status: turnStatusSchema,
  reply: z.string().optional(),
  fallback: z.boolean().optional(),
  approval: cardSchema.approval.optional(),
  question: cardSchema.question.optional(),
  ambiguous: cardSchema.ambiguous.optional(),
  handoff: cardSchema.handoff.optional(),
  requestedAt: z.number().int().nonnegative(),
});

export const transcriptSchema = z.looseObject({
  conversationId: z.string(),
  head: z.number().int().nonnegative(),
  turns: z.array(
    z.looseObject({
      turnId: z.string(),
      position: z.number().int().nonnegative(),
      user: z.looseObject({ text: z.string(), caller: z.string(), receivedAtMs: z.number() }),
      status: turnStatusSchema,
      reply: z.string().optional(),
      fallback: z.boolean().optional(),
      approval: cardSchema.approval.optional(),
      question: cardSchema.question.optional(),
      ambiguous: cardSchema.ambiguous.optional(),
      handoff: cardSchema.handoff.optional(),
    }),
  ),
});

export const memorySchema = z.looseObject({
  conversationId: z.string(),
  head: z.number().int().nonnegative(),
  entries: z.array(
    z.looseObject({
      key: z.string(),
      value: z.string(),
      position: z.number().int().nonnegative(),
      turnId: z.string(),
      toolCallId: z.string(),
      setAtMs: z.number(),
    }),
  ),
});

export const memoryClearedSchema = z.looseObject({
  conversationId: z.string(),
  key: z.string().optional(),
  cleared: z.array(z.string()),
  position: z.number().int().nonnegative().optional(),
  clearedBy: z.string(),
  head: z.number().int().nonnegative(),
});

export const repairResultSchema = z.looseObject({
  conversationId: z.string(),
  actor: z.string(),
  dryRun: z.boolean(),
  excised: z.array(
    z.looseObject({ position: z.number().int(), leafDigestHex: z.string(), problem: z.string() }),
  ),
  head: z.number().int().nonnegative(),
  message: z.string(),
});

export const eraseResultSchema = z.looseObject({
  conversationId: z.string(),
  actor: z.string(),
  dryRun: z.boolean(),
  erased: z.array(
    z.looseObject({
      position: z.number().int(),
      kind: z.string(),
      turnId: z.string(),
      leafDigestHex: z.string(),
    }),
  ),
  head: z.number().int().nonnegative(),
  message: z.string(),
});

export const resolveResultSchema = z.looseObject({
  conversationId: z.string(),
  turnId: z.string(),
  decision: z.enum(['ran', 'did_not_run']),
  resultUnknown: z.boolean(),
  actor: z.string(),
  position: z.number().int().nonnegative(),
  head: z.number().int().nonnegative(),
  message: z.string(),
});

export const acceptRollbackResultSchema = z.looseObject({
  conversationId: z.string(),
  checkpointHead: z.number().int().nonnegative(),
  checkpointRoot: z.string(),
  position: z.number().int().nonnegative(),
  head: z.number().int().nonnegative(),
  actor: z.string(),
  message: z.string(),
});

/** The payment policy in force (`PaymentPolicy`); `limits` is kept as the server sent it. */
export const paymentPolicySchema = z.looseObject({
  conversationId: z.string(),
  wallet: z.string(),
  limits: z.unknown().optional(),
  setBy: z.string().optional(),
  setAtMs: z.number().int().nonnegative().optional(),
  position: z.number().int().nonnegative().optional(),
  head: z.number().int().nonnegative(),
});

/** What setting a payment policy committed (`PaymentPolicySet`). */
export const paymentPolicySetSchema = paymentPolicySchema.extend({
  setBy: z.string(),
  setAtMs: z.number().int().nonnegative(),
  position: z.number().int().nonnegative(),
  message: z.string(),
});

/** One recorded change of a persona's payment policy (`PersonaPaymentPolicyChange`). */
const personaPolicyChangeSchema = z.looseObject({
  wallet: z.string(),
  limits: z.unknown().optional(),
  setBy: z.string(),
  setAtMs: z.number().int().nonnegative(),
  reason: z.string(),
  sequence: z.number().int().positive(),
});

/** A persona's payment policy in force and every change (`PersonaPaymentPolicy`). */
export const personaPaymentPolicySchema = z.looseObject({
  personaId: z.string(),
  wallet: z.string(),
  limits: z.unknown().optional(),
  setBy: z.string().optional(),
  setAtMs: z.number().int().nonnegative().optional(),
  reason: z.string().optional(),
  sequence: z.number().int().nonnegative(),
  history: z.array(personaPolicyChangeSchema),
});

/** What setting a persona's payment policy recorded (`PersonaPaymentPolicySet`). */
export const personaPaymentPolicySetSchema = personaPaymentPolicySchema.extend({
  message: z.string(),
});

/** A persona's payment policy and its history (`PersonaPaymentPolicy`). */
export type PersonaPaymentPolicy = z.output<typeof personaPaymentPolicySchema>;
/** What setting a persona's payment policy recorded (`PersonaPaymentPolicySet`). */
export type PersonaPaymentPolicySet = z.output<typeof personaPaymentPolicySetSchema>;
/** The payment policy in force (`PaymentPolicy`). */
export type PaymentPolicy = z.output<typeof paymentPolicySchema>;
/** What setting a payment policy committed (`PaymentPolicySet`). */
export type PaymentPolicySet = z.output<typeof paymentPolicySetSchema>;
/** What an erasure did (`EraseResult`). */
export type EraseResult = z.output<typeof eraseResultSchema>;
/** What a repair found and did (`RepairResult`). */
export type RepairResult = z.output<typeof repairResultSchema>;
/** What a resolve committed (`ResolveResult`). */
export type ResolveResult = z.output<typeof resolveResultSchema>;
/** What accepting a rollback committed (`AcceptRollbackResult`). */
export type AcceptRollbackResult = z.output<typeof acceptRollbackResultSchema>;
/** A turn's settled state (`TurnReply`). */
export type TurnReply = z.output<typeof turnReplySchema>;
/** The transcript (`Transcript`). */
export type Transcript = z.output<typeof transcriptSchema>;
/** A conversation's memory (docs/api.md, "Memory"). */
export type Memory = z.output<typeof memorySchema>;
/** What a clear of memory committed. */
export type MemoryCleared = z.output<typeof memoryClearedSchema>;
/** One turn of a transcript. */
export type TranscriptTurn = Transcript['turns'][number];
/** A paused turn's approval card. */
export type ApprovalCard = z.output<typeof cardSchema.approval>;

/** An answer and the JSON it was parsed from. */
export interface Parsed<T> {
  readonly value: T;
  /** The body as the API sent it (for `--format json`). */
  readonly raw: unknown;
}
