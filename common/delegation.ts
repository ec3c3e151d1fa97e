/**
 * The limits on delegation (docs/turns.md, "Delegation"), one place for both planes: the
 * harness's turn machine applies them, and the control plane refuses a step that breaks
 * them as forged.
 */

/**
 * How deep threads nest: the answering agent's own calls are depth 0, a delegate's are
 * depth 1, its delegate's depth 2, and so on up to this.
 */
export const MAX_DELEGATION_DEPTH = 3;

/**
 * How long a thread may run, from the end of the model reply that asked for it to the end
 * of its own latest model reply, less the turn's waits for a person in between (times
 * recorded in the journal, so replay decides the same; harness/turn/turn-delegation.ts).
 */
export const DELEGATION_DEADLINE_MS = 5 * 60_000;
