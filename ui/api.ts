/**
 * What the UI reads, through the dashboard proxy on the same origin (docs/ui.md): the
 * Conversation CRD (list and get in the namespace) and the door's read subresources. The
 * proxy adds the kubeconfig's credentials; the page holds none.
 */
export const DOOR = '/apis/api.polychrome.dev/v1alpha1';
const CRD = '/apis/polychrome.dev/v1alpha1';

/** The namespace the page was served for: `.../namespaces/{ns}/ui/index.html`. */
export function pageNamespace(path: string = location.pathname): string {
  const match = /\/namespaces\/([^/]+)\/ui\//u.exec(path);
  return match === null ? 'default' : decodeURIComponent(match[1] ?? 'default');
}

/** A Conversation as the CRD holds it (only what the UI reads). */
export interface Conversation {
  readonly metadata: {
    readonly name: string;
    readonly uid?: string;
    readonly creationTimestamp?: string;
  };
  readonly spec?: { readonly owner?: string };
  readonly status?: {
    readonly phase?: string;
    readonly conditions?: readonly {
      readonly type: string;
      readonly status: string;
      readonly reason?: string;
      readonly message?: string;
    }[];
    readonly journal?: unknown;
  };
}

/** A refusal from the cluster, with its HTTP status and the server's message. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function read(path: string, accept = 'application/json'): Promise<Response> {
  const response = await fetch(path, { headers: { accept }, credentials: 'same-origin' });
  if (!response.ok) {
    const text = await response.text();
    let message = text.slice(0, 500);
    try {
      const status = JSON.parse(text) as { message?: unknown };
      if (typeof status.message === 'string') message = status.message;
    } catch {
      // a plain-text answer: keep it
    }
    throw new HttpError(response.status, message);
  }
  return response;
}

function segment(value: string): string {
  return encodeURIComponent(value);
}

export async function listConversations(ns: string): Promise<Conversation[]> {
  const list = (await (await read(`${CRD}/namespaces/${segment(ns)}/conversations`)).json()) as {
    items?: Conversation[];
  };
  return list.items ?? [];
}

export async function getConversation(ns: string, name: string): Promise<Conversation> {
  return (await (
    await read(`${CRD}/namespaces/${segment(ns)}/conversations/${segment(name)}`)
  ).json()) as Conversation;
}

/** The door path of a conversation's subresource. */
export function subresource(ns: string, name: string, sub: string): string {
  return `${DOOR}/namespaces/${segment(ns)}/conversations/${segment(name)}/${sub}`;
}

export async function exportText(ns: string, name: string): Promise<string> {
  return await (await read(subresource(ns, name, 'export'), 'application/x-ndjson')).text();
}

/** A conversation's memory as the `memory` subresource gives it (docs/api.md, "Memory"). */
export interface MemoryEntries {
  readonly entries: readonly {
    readonly key: string;
    readonly value: string;
    readonly position: number;
    readonly turnId: string;
    readonly setAtMs: number;
  }[];
}

export async function getMemory(ns: string, name: string): Promise<MemoryEntries> {
  return (await (await read(subresource(ns, name, 'memory'))).json()) as MemoryEntries;
}
