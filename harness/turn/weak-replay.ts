import { verifyApprovalAnswer } from './approval-token';
import { describe, type TurnLog } from './journal-turns';
import type { ReplayOptions } from './replay-options';
import type { Divergence, UncheckedStep } from './replay-verdict';
import { approvalAnswerFromProto } from './request-codec';
import { modelCallFromProto } from './step-codec';

/**
 * Weak replay (docs/replay.md, `ReplayMode.Weak`): a turn recorded before configurations
 * were has no request digests to check, so its outputs are re-read, its tool calls checked
 * against them, its approvals against the approval key, and its final text against the
 * last reply.
 */

/**
 * The weak mode: outputs re-read, calls and the final text checked against them. An erased
 * entry is not compared, and what was to be checked against an erased output is listed in
 * `unchecked` (docs/replay.md, "Erased entries").
 */
export function weakCheck(
  log: TurnLog,
  options: ReplayOptions,
  unchecked: UncheckedStep[] = [],
): Divergence | undefined {
  const uses = new Map<string, { name: string; argsJson: string }>();
  let lastText: string | undefined;
  /** An erased model output: the calls and text after it cannot be checked against it. */
  let erasedOutput: number | undefined;
  let step = 0;
  for (const e of log.events) {
    if (log.erased.has(e.position)) {
      unchecked.push({
        position: e.position,
        erasedPosition: e.position,
        what: `${e.kind} erased: not compared`,
      });
      if (e.kind === 'model_call') {
        erasedOutput = e.position;
        lastText = undefined;
      }
      continue;
    }
    const diverge = (expected: string): Divergence => ({
      turnId: log.turnId,
      step,
      position: e.position,
      expected,
      found: describe(e),
    });
    switch (e.kind) {
      case 'model_call': {
        step = e.payload.step;
        const record = modelCallFromProto(e.payload);
        for (const block of record.content) {
          if (block.type === 'tool_use') uses.set(block.toolCallId, block);
        }
        lastText = record.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
        break;
      }
      case 'tool_call': {
        const use = uses.get(e.payload.toolCallId);
        if (use === undefined && erasedOutput !== undefined) {
          unchecked.push({
            position: e.position,
            erasedPosition: erasedOutput,
            what: 'tool_call: the model output that asked for it was erased',
          });
          break;
        }
        if (
          use === undefined ||
          use.name !== e.payload.toolName ||
          use.argsJson !== e.payload.argsJson
        ) {
          return diverge(
            use === undefined
              ? `no tool_call: no model output asked for ${e.payload.toolCallId}`
              : `tool_call ${use.name} ${use.argsJson}`,
          );
        }
        break;
      }
      case 'approval_response': {
        const key = options.approvalPublicKey;
        if (key === undefined) break;
        const answer = approvalAnswerFromProto(e.payload);
        const request = log.events.find(
          (r) => r.kind === 'approval_request' && r.payload.requestId === answer.requestId,
        );
        if (request?.kind !== 'approval_request') break;
        const pending = {
          turnId: log.turnId,
          requestId: request.payload.requestId,
          toolName: request.payload.toolName,
          argsSha256: request.payload.argsSha256,
        };
        if (!verifyApprovalAnswer(answer, pending, options.verifier, key).ok) {
          return diverge(
            `an approval_response signed by the approval key for ${pending.requestId}`,
          );
        }
        break;
      }
      case 'turn_complete':
        if (!e.payload.fallback && lastText !== undefined && e.payload.text !== lastText) {
          return diverge(`turn_complete with the last reply's text ${JSON.stringify(lastText)}`);
        }
        break;
      default:
        break;
    }
  }
  return undefined;
}
