import type { KubernetesObject } from '@kubernetes/client-node';
import { conversationAttributes } from '../../common/genai-attributes';
import { inSpan, linkFromTraceparent, ROOT_TRACE_CONTEXT } from '../../common/tracing';

/**
 * The annotation through which whoever creates or changes a Conversation with kubectl or
 * a GitOps tool hands over their trace: a W3C `traceparent` value.
 */
export const TRACEPARENT_ANNOTATION = 'polychrome.dev/traceparent';

/**
 * Runs one reconcile pass in a span `reconcile Conversation`. A pass is caused by a watch
 * event, not by a request, so it starts a trace of its own; when the Conversation carries
 * {@link TRACEPARENT_ANNOTATION}, the span links to that span (a link, not a parent:
 * every later pass would otherwise land in the same old trace).
 */
export function tracedPass<T>(
  namespace: string,
  name: string,
  cached: KubernetesObject | undefined,
  pass: () => Promise<T>,
): Promise<T> {
  const link = linkFromTraceparent(cached?.metadata?.annotations?.[TRACEPARENT_ANNOTATION]);
  return inSpan(
    'reconcile Conversation',
    {
      parent: ROOT_TRACE_CONTEXT,
      attributes: {
        'k8s.namespace.name': namespace,
        'polychrome.conversation.name': name,
        ...(cached?.metadata?.uid === undefined ? {} : conversationAttributes(cached.metadata.uid)),
      },
      ...(link === undefined ? {} : { links: [link] }),
    },
    pass,
  );
}
