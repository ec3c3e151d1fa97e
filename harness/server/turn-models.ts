import type { ModelProvider } from '../../common/model/model-port';
import {
  RelayedModelProvider,
  type AgentModelSettings,
  type ModelChannel,
} from '../model/relayed-model';

/**
 * The model of each agent of one turn (runTurn's `modelFor`): an agent whose settings say
 * the control plane makes its calls gets a {@link RelayedModelProvider} over the turn's
 * stream; any other gets the harness's own provider for its model (`direct`, from the
 * harness's configuration). An agent the settings do not name gets the provider of
 * `fallback` (the turn's own agent), as every agent did before agents had models of their
 * own; with `fallback` unnamed too, the harness's default model.
 *
 * @param agents each agent's model settings by name ('' for an unnamed one)
 */
export function turnModels(
  agents: ReadonlyMap<string, AgentModelSettings>,
  direct: (model: string) => ModelProvider,
  channel: ModelChannel,
  fallback: string,
): (agent: string) => ModelProvider {
  const built = new Map<string, ModelProvider>();
  const providerOf = (agent: string, settings: AgentModelSettings | undefined): ModelProvider => {
    if (settings === undefined) return direct('');
    if (settings.relay === undefined) return direct(settings.model);
    return new RelayedModelProvider(channel, agent, settings.model, settings.relay);
  };
  return (agent) => {
    const name = agents.has(agent) ? agent : fallback;
    let provider = built.get(name);
    if (provider === undefined) {
      provider = providerOf(name, agents.get(name));
      built.set(name, provider);
    }
    return provider;
  };
}

/**
 * The model settings the turn's `start` gives: its own agent's only (TurnStart.agent), by
 * name. Agents of their own (TurnStart's list of agents) add theirs here.
 */
export function agentModelSettings(request: {
  readonly model: string;
  readonly relay?: AgentModelSettings['relay'];
  readonly input: { readonly agentName?: string };
  readonly agentSettings?: ReadonlyMap<string, AgentModelSettings>;
}): ReadonlyMap<string, AgentModelSettings> {
  const own: AgentModelSettings = {
    model: request.model,
    ...(request.relay === undefined ? {} : { relay: request.relay }),
  };
  // Every agent of the turn (TurnStart.agents), then the answering one from the start.
  return new Map([...(request.agentSettings ?? []), [request.input.agentName ?? '', own]]);
}
