import { ResolveDecision } from '../../proto/gen/polychrome/events/v1/events';
import { StandingState, type TurnStanding } from '../../common/turn-standing';
import { ERASED_TEXT } from './erased-inputs';
import type { TurnLog } from './journal-turns';
import { approvalAnswerFromProto } from './request-codec';
import type { ReplayResolution, TranscriptItem } from './replay-verdict';

/**
 * What replay reports about a turn besides whether it follows from its inputs: its
 * transcript, the reason of a quarantine that stands, and how admins resolved it.
 */

/** The reason of the quarantine that stands (none once resolved), and the resolutions. */
export function noteOf(
  log: TurnLog,
  standing: TurnStanding,
): { note?: string; resolutions?: ReplayResolution[] } {
  const resolutions = log.events.flatMap((e): ReplayResolution[] =>
    e.kind === 'turn_resolved'
      ? [
          {
            position: e.position,
            decision:
              e.payload.decision === ResolveDecision.RESOLVE_DECISION_RAN ? 'ran' : 'did_not_run',
            toolCallId: e.payload.toolCallId,
            resultUnknown: e.payload.resultUnknown,
            actor: e.payload.actor,
            caller: e.payload.caller,
          },
        ]
      : [],
  );
  return {
    ...(standing.state === StandingState.Quarantined ? { note: standing.reason } : {}),
    ...(resolutions.length === 0 ? {} : { resolutions }),
  };
}

export function transcriptOf(log: TurnLog): TranscriptItem[] {
  const items: TranscriptItem[] = [
    { type: 'user', text: log.erased.has(log.position) ? ERASED_TEXT : log.text },
  ];
  for (const e of log.events) {
    if (log.erased.has(e.position)) {
      const item = erasedItem(e.kind);
      if (item !== undefined) items.push(item);
      continue;
    }
    switch (e.kind) {
      case 'tool_call':
        items.push({ type: 'tool_call', name: e.payload.toolName, argsJson: e.payload.argsJson });
        break;
      case 'tool_result':
        items.push({ type: 'tool_result', content: e.payload.content, isError: e.payload.isError });
        break;
      case 'approval_response':
        items.push({
          type: 'approval',
          toolName: e.payload.toolName,
          decision: approvalAnswerFromProto(e.payload).decision,
        });
        break;
      case 'question_request':
        items.push({ type: 'question', question: e.payload.question });
        break;
      case 'turn_complete':
        items.push({ type: 'assistant', text: e.payload.text });
        break;
      default:
        break;
    }
  }
  return items;
}

/** An erased entry's place in the transcript; a model call has none there. */
function erasedItem(kind: string): TranscriptItem | undefined {
  switch (kind) {
    case 'tool_call':
      return { type: 'tool_call', name: ERASED_TEXT, argsJson: '' };
    case 'tool_result':
      return { type: 'tool_result', content: ERASED_TEXT, isError: false };
    case 'question_request':
      return { type: 'question', question: ERASED_TEXT };
    case 'turn_complete':
      return { type: 'assistant', text: ERASED_TEXT };
    default:
      return undefined;
  }
}
