/**
 * Approval rules (docs/approvals.md): which tool calls wait for a person. One rule for every
 * plane: the harness applies it to pause a call, the control plane to check that the
 * harness paused every call it had to. Pure.
 */

/**
 * An approval rule: a builtin tool name, `<mcpServer>/<tool>`, or `<mcpServer>/*` for every
 * tool of that server. MCP tool names may also contain `.`. The Conversation CRD's schema
 * (operator/api/v1alpha1) validates `spec.tools.requireApproval` with it.
 */
export const APPROVAL_RULE_PATTERN =
  '^([a-zA-Z0-9_-]{1,64}|[a-z0-9]([-a-z0-9]*[a-z0-9])?/([a-zA-Z0-9_.-]{1,128}|\\*))$';

const APPROVAL_RULE = new RegExp(APPROVAL_RULE_PATTERN, 'u');

/** The rules in force for one conversation. */
export type ApprovalRules = readonly string[];

/** True when `rule` fits {@link APPROVAL_RULE_PATTERN} (at most 192 characters). */
export function isApprovalRule(rule: string): boolean {
  return rule.length <= 192 && APPROVAL_RULE.test(rule);
}

/**
 * Whether calls to `toolName` (a builtin name or `<server>/<tool>`) need approval under
 * `rules`: an exact rule, or `<server>/*` for a tool of that server (split at the first
 * `/`: server names are DNS labels and hold none, tool names may). A wildcard names one
 * server exactly, never a prefix of its name.
 */
export function needsApproval(toolName: string, rules: ApprovalRules): boolean {
  const slash = toolName.indexOf('/');
  const serverWildcard = slash > 0 ? `${toolName.slice(0, slash)}/*` : undefined;
  return rules.some((rule) => rule === toolName || rule === serverWildcard);
}
