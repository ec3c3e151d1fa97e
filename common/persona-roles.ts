/**
 * Roles a persona can hold (docs/api.md, "Authentication"): the state plane stores them
 * with the persona, the control plane decides with them.
 */
export const Role = {
  /** May use every conversation and answer approvals. */
  Admin: 'admin',
  Member: 'member',
  /** A front end that connects people (chat bot, web app): the only sender of directives. */
  Edge: 'edge',
} as const;
export type Role = (typeof Role)[keyof typeof Role];
