import { AppError } from '../../common/errors';

/**
 * Which tools wait for a person before they run. Two sources feed one rule list: the
 * Conversation's `spec.tools.requireApproval` (written by whoever owns the conversation)
 * and a deployment-wide list from the harness environment (written by whoever runs the
 * cluster). The deployment list can only ADD rules: a conversation author cannot opt a
 * tool out of an approval the operator of the cluster demands, and the deployment list
 * has no syntax for removing one (an entry such as `!server/tool` is rejected, not
 * ignored, so a mistaken attempt is loud).
 *
 * Pure: no I/O, no environment reads; `common/config.ts` reads the variable and passes its
 * text to {@link parseApprovalRules}.
 */

/**
 * An approval rule: a builtin tool name, `<mcpServer>/<tool>`, or `<mcpServer>/*` for every
 * tool of that server. The same pattern as the Conversation CRD's `APPROVAL_RULE_PATTERN`
 * (operator/api/v1alpha1); restated here because the harness imports no other plane.
 */
export const APPROVAL_RULE_PATTERN =
  /^([a-zA-Z0-9_-]{1,64}|[a-z0-9]([-a-z0-9]*[a-z0-9])?\/([a-zA-Z0-9_.-]{1,128}|\*))$/u;

/** The rules in force for one conversation: sorted, without duplicates. */
export type ApprovalRules = readonly string[];

/** True when `rule` fits {@link APPROVAL_RULE_PATTERN}. */
export function isApprovalRule(rule: string): boolean {
  return rule.length <= 192 && APPROVAL_RULE_PATTERN.test(rule);
}

/**
 * Parses the deployment list: entries separated by commas and/or whitespace; empty text
 * means no rules.
 *
 * @param source names the list in error messages (for example the variable's name).
 * @throws AppError `invalid_argument` naming every entry that is not a rule, so the
 *   process can refuse to start with one message.
 */
export function parseApprovalRules(text: string, source: string): ApprovalRules {
  const entries = text.split(/[\s,]+/u).filter((entry) => entry !== '');
  const bad = entries.filter((entry) => !isApprovalRule(entry));
  if (bad.length > 0) {
    throw new AppError(
      'invalid_argument',
      `${source}: ${bad.map((entry) => JSON.stringify(entry)).join(', ')} ${bad.length === 1 ? 'is not an approval rule' : 'are not approval rules'}; each entry must be a builtin tool name, <mcpServer>/<tool> or <mcpServer>/*. This list can only add approvals; remove a rule by editing the list itself.`,
      { details: { source, invalid: bad.join(',') } },
    );
  }
  return normalize(entries);
}

/**
 * The union of the conversation's rules and the deployment's rules. The deployment list
 * only adds: every rule of either list is in the result.
 *
 * @param deploymentRules the deployment list, parsed by {@link parseApprovalRules} or
 *   given as plain strings (checked here either way).
 * @throws AppError `invalid_argument` naming the list and every malformed rule (the API
 *   server validates the CRD, so a bad conversation rule means the object was not read
 *   through it).
 */
export function mergeApprovalRules(
  conversationRules: readonly string[],
  deploymentRules: readonly string[],
): ApprovalRules {
  checkRules(conversationRules, 'spec.tools.requireApproval');
  checkRules(deploymentRules, 'the deployment approval list');
  return normalize([...conversationRules, ...deploymentRules]);
}

function checkRules(rules: readonly string[], source: string): void {
  const bad = rules.filter((rule) => !isApprovalRule(rule));
  if (bad.length === 0) return;
  throw new AppError(
    'invalid_argument',
    `${source}: ${bad.map((rule) => JSON.stringify(rule)).join(', ')} ${bad.length === 1 ? 'is not an approval rule' : 'are not approval rules'}; each entry must be a builtin tool name, <mcpServer>/<tool> or <mcpServer>/*.`,
    { details: { source, invalid: bad.join(',') } },
  );
}

/**
 * Whether calls to `toolName` (a builtin name or `<server>/<tool>`) need approval under
 * `rules`: an exact rule, or `<server>/*` for a tool of that server.
 */
export function needsApproval(toolName: string, rules: ApprovalRules): boolean {
  const slash = toolName.indexOf('/');
  const serverWildcard = slash > 0 ? `${toolName.slice(0, slash)}/*` : undefined;
  return rules.some((rule) => rule === toolName || rule === serverWildcard);
}

function normalize(rules: readonly string[]): ApprovalRules {
  return Object.freeze([...new Set(rules)].sort());
}
