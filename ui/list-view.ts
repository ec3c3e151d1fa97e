import { listConversations, type Conversation } from './api';
import { h, replace } from './dom';

function conditions(conversation: Conversation): HTMLElement {
  const list = conversation.status?.conditions ?? [];
  if (list.length === 0) return h('span', { class: 'badge' }, 'no conditions yet');
  return h(
    'span',
    {},
    ...list.map(
      (c) =>
        h(
          'span',
          {
            class: `badge ${c.status === 'True' ? (c.type === 'Degraded' ? 'warn' : 'ok') : ''}`,
            title: c.message ?? '',
          },
          `${c.type}=${c.status}${c.reason === undefined ? '' : ` (${c.reason})`}`,
        ),
      ' ',
    ),
  );
}

/** The conversations of the namespace, with their conditions. */
export async function renderList(root: HTMLElement, ns: string): Promise<void> {
  const conversations = await listConversations(ns);
  const rows = conversations.map((c) =>
    h(
      'tr',
      { 'data-conversation': c.metadata.name },
      h('td', {}, h('a', { href: `#/c/${encodeURIComponent(c.metadata.name)}` }, c.metadata.name)),
      h('td', {}, c.spec?.owner ?? ''),
      h('td', {}, c.status?.phase ?? ''),
      h('td', {}, conditions(c)),
      h('td', { class: 'mono' }, c.metadata.uid ?? ''),
    ),
  );
  replace(
    root,
    h('h2', {}, `Conversations in ${ns}`),
    conversations.length === 0
      ? h('p', {}, 'No Conversation in this namespace.')
      : h(
          'table',
          { id: 'conversations' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', {}, 'name'),
              h('th', {}, 'owner'),
              h('th', {}, 'phase'),
              h('th', {}, 'conditions'),
              h('th', {}, 'uid'),
            ),
          ),
          h('tbody', {}, ...rows),
        ),
  );
}
