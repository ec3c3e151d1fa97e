/**
 * The forensics UI (docs/ui.md): read-only, served by the control plane on the Kubernetes
 * door and reached through `kubectl polychrome dashboard`. `#/` lists the namespace's
 * conversations; `#/c/{name}` shows one, live, and verifies it in this browser.
 */
import { pageNamespace } from './api';
import { h, replace } from './dom';
import { ConversationView, messageOf } from './conversation-view';
import { renderList } from './list-view';

let current: ConversationView | undefined;

function route(): void {
  const root = document.getElementById('app');
  if (root === null) return;
  const ns = pageNamespace();
  const label = document.getElementById('namespace');
  if (label !== null) label.textContent = `namespace ${ns}`;
  current?.stop();
  current = undefined;
  const match = /^#\/c\/([^/]+)$/u.exec(location.hash);
  if (match === null) {
    renderList(root, ns).catch((error: unknown) =>
      replace(root, h('p', { class: 'error' }, messageOf(error))),
    );
    return;
  }
  current = new ConversationView(root, ns, decodeURIComponent(match[1] ?? ''));
  void current.start();
}

window.addEventListener('hashchange', route);
route();
