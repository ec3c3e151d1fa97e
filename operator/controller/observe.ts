/**
 * observe: the reads of one pass, and nothing else. Returns the snapshot `plan` and
 * `report` work from, or undefined when the Conversation no longer exists.
 */
import { SandboxBackend } from '../api/v1alpha1/conversation-values';
import { warmPoolNameOf } from './desired-claim';
import { podTemplateNameOf } from './desired-pod';
import type { ConversationKube } from './kube-client';
import type { ConversationSnapshot } from './snapshot';

/**
 * Reads the Conversation and its sandbox: for agent-sandbox the warm pool and its
 * template, the claim (named after the Conversation), its Sandbox and that Sandbox's pod;
 * for the pod backend the PodTemplate and the pod (named after the Conversation).
 *
 * @throws the client's error for anything but NotFound (the work queue backs off).
 */
export async function observeConversation(
  kube: ConversationKube,
  namespace: string,
  name: string,
  harnessImage: string,
): Promise<ConversationSnapshot | undefined> {
  const conversation = await kube.getConversation(namespace, name);
  if (conversation === undefined) return undefined;
  const backend = conversation.spec.sandbox?.backend ?? SandboxBackend.AgentSandbox;

  if (backend === SandboxBackend.Pod) {
    const templateName = podTemplateNameOf(conversation);
    const [templateSpec, pod] = await Promise.all([
      kube.getPodTemplateSpec(namespace, templateName),
      kube.getPod(namespace, name),
    ]);
    return {
      conversation,
      harnessImage,
      sandbox: {
        backend: 'pod',
        templateName,
        templateExplicit: conversation.spec.sandbox?.template !== undefined,
        ...(templateSpec === undefined ? {} : { templateSpec }),
        ...(pod === undefined ? {} : { pod }),
      },
    };
  }

  const warmPoolName = warmPoolNameOf(conversation);
  const [warmPool, claim] = await Promise.all([
    kube.getWarmPool(namespace, warmPoolName),
    kube.getClaim(namespace, name),
  ]);
  const templateName = warmPool?.templateName;
  const template =
    templateName === undefined ? undefined : await kube.getSandboxTemplate(namespace, templateName);
  const templateFound = templateName === undefined ? undefined : template !== undefined;
  const sandbox =
    claim?.sandboxName === undefined
      ? undefined
      : await kube.getSandbox(namespace, claim.sandboxName);
  const pod = sandbox === undefined ? undefined : await kube.getPod(namespace, sandbox.podName);
  return {
    conversation,
    harnessImage,
    sandbox: {
      backend: 'agent-sandbox',
      warmPoolName,
      ...(warmPool === undefined ? {} : { warmPool }),
      ...(templateFound === undefined ? {} : { templateFound }),
      ...(template === undefined ? {} : { template }),
      ...(claim === undefined ? {} : { claim }),
      ...(sandbox === undefined ? {} : { sandbox }),
      ...(pod === undefined ? {} : { pod }),
    },
  };
}
