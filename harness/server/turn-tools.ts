import { needsApproval, type ApprovalRules } from '../../common/approval-rules';
import type { McpServerListing } from '../tools/mcp-tools';
import type { TurnTool } from '../turn/turn-records';
import type { ToolReference } from './tool-spec-codec';

/**
 * The tools a turn offers. Three sources:
 *
 * - `start.tools` from the control plane: full specs (tools it defines, e.g. control-plane
 *   hosted ones) and built-in or reserved tools named by reference, which the harness's
 *   catalog fills in (turn-start-codec.ts);
 * - the harness's own MCP servers (`HARNESS_MCP_SERVERS`): every tool they list, as
 *   `<server>/<tool>`, `pure` when annotated read-only, else `side_effect`;
 * - approval: a tool needs approval when the control plane's spec says so (a full spec or
 *   a by-reference entry of that name) or a deployment rule (`HARNESS_REQUIRE_APPROVAL`)
 *   matches it. Both only add.
 *
 * This file has no I/O and does not load the MCP SDK (`import type` only).
 */

/** What the harness server needs of its MCP servers (the `McpToolRunner` has it). */
export interface McpToolSource {
  /** The configured servers' names. */
  readonly serverNames: readonly string[];
  /** Each server's tools or why not; kept per connection, so cheap after the first turn. */
  listToolsByServer(signal: AbortSignal): Promise<readonly McpServerListing[]>;
}

/**
 * True when `name` is `<server>/<tool>` of one of `servers` (split at the first `/`, as
 * mcp-tools.ts `splitToolName` does; restated so this file loads no MCP code).
 */
export function isToolOfServers(name: string, servers: readonly string[]): boolean {
  const slash = name.indexOf('/');
  return slash > 0 && slash < name.length - 1 && servers.includes(name.slice(0, slash));
}

/** The turn's tools, and what could not be offered (for the log). */
export interface OfferedTools {
  readonly tools: TurnTool[];
  /** Servers whose tools are left out of this turn, and why. */
  readonly unlisted: readonly { readonly server: string; readonly error: Error }[];
  /** By-reference entries no listed server has (their server failed, or lacks the tool). */
  readonly unresolved: readonly ToolReference[];
}

/**
 * `fromControlPlane` (already under deployment policy), then the listed MCP tools in
 * server order. The MCP tools take their approval from `rules` and from any by-reference
 * entry of the same name in `references`.
 */
export function offeredTools(
  fromControlPlane: readonly TurnTool[],
  listings: readonly McpServerListing[],
  references: readonly ToolReference[],
  rules: ApprovalRules,
): OfferedTools {
  const tools = [...fromControlPlane];
  const taken = new Set(fromControlPlane.map((tool) => tool.name));
  const unlisted: { server: string; error: Error }[] = [];
  for (const listing of listings) {
    if ('error' in listing) {
      unlisted.push({ server: listing.server, error: listing.error });
      continue;
    }
    for (const tool of listing.tools) {
      // A name offered twice: the control plane sent a full spec of the same name as an MCP
      // tool. Its spec wins (it is what the conversation's owner configured, and it may
      // host the tool on the control plane), so the MCP tool is not offered; a model
      // cannot be given two tools of one name anyway.
      if (taken.has(tool.name)) continue;
      taken.add(tool.name);
      const reference = references.find((r) => r.name === tool.name);
      const approvalReason = reference?.approvalReason;
      tools.push({
        name: tool.name,
        description: tool.description,
        inputSchema: tool.inputSchema,
        effect: tool.effect,
        needsApproval: needsApproval(tool.name, rules) || reference?.needsApproval === true,
        ...(approvalReason === undefined ? {} : { approvalReason }),
      });
    }
  }
  return {
    tools,
    unlisted,
    unresolved: references.filter((reference) => !taken.has(reference.name)),
  };
}
