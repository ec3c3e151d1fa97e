/**
 * What the runner hands the harness for one attempt, and what it checks the attempt's
 * steps against (docs/turns.md "One message", 6): the start the plan builds, the model
 * routes of the agents whose calls the control plane makes, and the dispatched facts.
 * Pure.
 */
import type { TurnStart } from '../../proto/gen/polychrome/harness/v1/harness';
import type { Conversation } from '../api/v1alpha1/conversation-types';
import type { JournalView, TurnView } from './journal-view-types';
import { NO_MODEL_ROUTES, type ModelRoute, type ModelRouteSource } from './model-relay-port';
import { rosterRoutes, turnRoster } from './plan-agents';
import { turnStartOf, type DispatchedTurn } from './plan-harness-checks';
import { relayedStart } from './plan-model-request';

/** One attempt's start and the routes its `model_request`s may take. */
export interface HarnessStart {
  readonly start: TurnStart;
  readonly routes: ReadonlyMap<string, ModelRoute>;
}

/**
 * The start of an attempt of `turn`. An Agent's model is its ModelConfig, as the turn's
 * roster recorded it; an inline agent's calls are relayed only where `routeSource` routes
 * them.
 */
export function harnessStart(
  conversation: Conversation,
  view: JournalView,
  turn: TurnView,
  attempt: number,
  limits: Parameters<typeof turnStartOf>[4],
  routeSource: ModelRouteSource | undefined,
): HarnessStart {
  const roster = turnRoster(view, turn);
  const routes =
    roster === undefined
      ? (routeSource?.routesFor(conversation, turn) ?? NO_MODEL_ROUTES)
      : rosterRoutes(roster, conversation.metadata.namespace ?? '');
  return {
    start: relayedStart(turnStartOf(conversation, view, turn, attempt, limits), routes),
    routes,
  };
}

/**
 * What the plan checks a dispatched turn's steps against: the turn, the journal's newest
 * agent configuration (docs/replay.md) and the roster the turn runs under.
 */
export function dispatchedFacts(
  conversation: Conversation,
  view: JournalView | undefined,
  turn: TurnView,
): DispatchedTurn {
  const newest = view?.newestAgentConfig;
  const roster = view === undefined ? undefined : turnRoster(view, turn);
  return {
    turn,
    conversation,
    ...(view === undefined ? {} : { agentConfigs: view.agentConfigs }),
    ...(newest === undefined ? {} : { newestAgentConfig: newest.sha256 }),
    ...(roster === undefined ? {} : { roster }),
  };
}
