import type { ApprovalDecision, ApprovalScope } from '../../common/approval-bytes';
import type { StopReason, ToolDefinition, Usage } from '../../common/model/model-port';

/**
 * Domain types of the turn loop's committed steps and requests. Each maps 1:1 onto the
 * events.proto message named in its doc (`step-codec.ts` converts); field names follow
 * the proto so logs, JSON and proto spell ids one way.
 */

/** Whether a tool touches the world. */
export const ToolEffect = {
  /** Deterministic, no I/O: safe to run again after a crash. */
  Pure: 'pure',
  /** Committed before it runs; never re-run when its outcome is unknown. */
  SideEffect: 'side_effect',
} as const;
export type ToolEffect = (typeof ToolEffect)[keyof typeof ToolEffect];

/** Where a tool runs. */
export const ToolHost = {
  /** In the harness (built-in and MCP tools). */
  Harness: 'harness',
  /** On the control plane, through the trusted-tool proxy (payments: the harness holds no wallet key). */
  ControlPlane: 'control_plane',
} as const;
export type ToolHost = (typeof ToolHost)[keyof typeof ToolHost];

/** A tool offered in a turn, with the policy the loop enforces. */
export interface TurnTool extends ToolDefinition {
  readonly effect: ToolEffect;
  readonly needsApproval: boolean;
  /** Shown on the approval card; defaults to a sentence naming the tool. */
  readonly approvalReason?: string;
  /** @default 'harness' */
  readonly host?: ToolHost;
}

/** A block of a recorded model output (proto `ContentBlock`; `argsJson` is canonical JSON). */
export type RecordedBlock =
  | { readonly type: 'text'; readonly text: string }
  | {
      readonly type: 'tool_use';
      readonly toolCallId: string;
      readonly name: string;
      readonly argsJson: string;
    };

/** proto `ModelCall`: one completed model round trip. */
export interface ModelCallRecord {
  readonly turnId: string;
  /** 1-based; the closing call takes the number after the last budgeted step. */
  readonly step: number;
  readonly model: string;
  readonly content: readonly RecordedBlock[];
  readonly stopReason: StopReason;
  readonly usage: Usage;
  readonly startedAtMs: number;
  readonly finishedAtMs: number;
  readonly closing: boolean;
  /** SHA-256 of the agent configuration the call ran under (docs/replay.md); absent before recording. */
  readonly configSha256?: Uint8Array;
  /** SHA-256 of the canonical bytes of the request the machine built; set with `configSha256`. */
  readonly requestSha256?: Uint8Array;
  /** The agent that made the call (docs/turns.md, "Handoffs"); absent for an unnamed agent. */
  readonly agent?: string;
  /**
   * The delegation thread that made the call: its `__delegate_to` call's id (docs/turns.md,
   * "Delegation"); absent at the top.
   */
  readonly thread?: string;
  /** The thread's depth (1 for a delegate of the top agent); absent at the top. */
  readonly depth?: number;
}

/** proto `AgentConfig`: the configuration a turn runs under, recorded when it is new. */
export interface AgentConfigRecord {
  readonly turnId: string;
  /** SHA-256 of `configJson`'s UTF-8 bytes. */
  readonly sha256: Uint8Array;
  /** Canonical JSON (docs/replay.md). */
  readonly configJson: string;
}

/** proto `ToolCall`. */
export interface ToolCallRecord {
  readonly turnId: string;
  /** The model round trip that asked for the call. */
  readonly step: number;
  readonly toolCallId: string;
  readonly toolName: string;
  readonly argsJson: string;
  readonly effect: ToolEffect;
  /** Set when the call runs under an approval; empty otherwise. */
  readonly approvalRequestId: string;
  /** The agent whose model asked for the call; absent for an unnamed agent. */
  readonly agent?: string;
  /** The delegation thread that asked for it; absent at the top (ModelCallRecord.thread). */
  readonly thread?: string;
  /** The thread's depth; absent at the top. */
  readonly depth?: number;
}

/** proto `ToolResult`. */
export interface ToolResultRecord {
  readonly turnId: string;
  readonly toolCallId: string;
  readonly content: string;
  readonly isError: boolean;
  /** True when the result is a denial given to the model instead of running the tool. */
  readonly denied: boolean;
  /** The delegation thread of the call; absent at the top. */
  readonly thread?: string;
  /**
   * The agent that answered on the thread this result closes (the result of a
   * `__delegate_to` call whose thread ran); absent for every other result.
   */
  readonly delegate?: string;
}

/**
 * proto `AgentHandoff`: the turn moved from one agent to another and goes on under the
 * same turn id (docs/turns.md, "Handoffs"). A step, not a settling marker.
 */
export interface AgentHandoffRecord {
  readonly turnId: string;
  /** The model round trip whose `__handoff_to` call moved the turn. */
  readonly step: number;
  readonly toolCallId: string;
  readonly fromAgent: string;
  readonly toAgent: string;
  readonly reason: string;
}

/** A committed step of a turn, in journal order. */
export type TurnStep =
  | { readonly kind: 'model_call'; readonly record: ModelCallRecord }
  | { readonly kind: 'tool_call'; readonly record: ToolCallRecord }
  | { readonly kind: 'tool_result'; readonly record: ToolResultRecord }
  | { readonly kind: 'agent_config'; readonly record: AgentConfigRecord }
  | { readonly kind: 'agent_handoff'; readonly record: AgentHandoffRecord };

/** proto `ApprovalRequest`. */
export interface ApprovalRequestRecord {
  readonly turnId: string;
  readonly requestId: string;
  readonly toolCallId: string;
  readonly toolName: string;
  readonly argsJson: string;
  /** SHA-256 of `argsJson`'s UTF-8 bytes. */
  readonly argsSha256: Uint8Array;
  readonly reason: string;
  /** Empty means any admin. */
  readonly requiredApprover: string;
}

/** proto `ApprovalResponse`: a signed answer (docs/approvals.md). */
export interface ApprovalAnswer {
  readonly turnId: string;
  readonly requestId: string;
  readonly toolName: string;
  readonly argsSha256: Uint8Array;
  readonly decision: ApprovalDecision;
  readonly answeredBy: string;
  readonly keyId: string;
  readonly signature: Uint8Array;
  readonly answeredAtMs: number;
  readonly comment: string;
  /** The requester approved their own call (allowed by the control plane's setting). */
  readonly selfApproval?: boolean;
  /** Format v2: conversation, expiry and single-use id, signed. Absent: a v1 answer. */
  readonly scope?: ApprovalScope;
}

/** proto `QuestionRequest`. */
export interface QuestionRequestRecord {
  readonly turnId: string;
  readonly requestId: string;
  readonly toolCallId: string;
  readonly question: string;
}

/** proto `QuestionResponse`. */
export interface QuestionAnswer {
  readonly turnId: string;
  readonly requestId: string;
  readonly answer: string;
  readonly answeredBy: string;
  readonly answeredAtMs: number;
}

/** proto `Handoff`. */
export interface HandoffRecord {
  readonly turnId: string;
  readonly toolCallId: string;
  readonly targetAgent: string;
  readonly reason: string;
}
