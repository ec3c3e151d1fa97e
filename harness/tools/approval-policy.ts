import { isApprovalRule, type ApprovalRules } from '../../common/approval-rules';
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

function normalize(rules: readonly string[]): ApprovalRules {
  return Object.freeze([...new Set(rules)].sort());
}
