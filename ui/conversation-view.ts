/**
 * One conversation: its turns from the `log` stream, live (events and text as they come),
 * and the verification panel, which re-renders the events from the verified export.
 */
import { EventKind } from '../common/event-kinds';
import { getConversation, getMemory, HttpError, subresource, type Conversation } from './api';
import { h, replace } from './dom';
import {
  actorOf,
  finalAnswerNote,
  finalAnswersOf,
  groupByTurn,
  type FinalAnswer,
  standingLabel,
  standingsByTurn,
  summaryOf,
  threadOf,
  type Seal,
  type TimelineEvent,
} from './timeline';
import { PaymentsPanel } from './payments-panel';
import { VerifyPanel } from './verify-panel';

/** The state the view renders. */
export class ConversationView {
  private readonly events = new Map<number, TimelineEvent>();
  /** Live text by turn and thread ('' for the turn's own agent), as it comes. */
  private readonly live = new Map<string, { turnId: string; thread: string; text: string }>();
  private source: EventSource | undefined;
  private scheduled = false;
  private streamNote = 'connecting to the log stream…';
  private readonly table = h('div', { id: 'timeline' });
  private readonly liveBox = h('div', { id: 'live' });
  /** What the agent keeps across turns, read again after each memory event. */
  private readonly memoryBox = h('div', { id: 'memory' });
  private readonly panel: VerifyPanel;
  private readonly paymentsPanel = new PaymentsPanel();

  constructor(
    private readonly root: HTMLElement,
    private readonly ns: string,
    private readonly name: string,
  ) {
    this.panel = new VerifyPanel(ns, name, () => this.schedule());
  }

  async start(): Promise<void> {
    let conversation: Conversation;
    try {
      conversation = await getConversation(this.ns, this.name);
    } catch (error) {
      replace(this.root, h('p', { class: 'error' }, messageOf(error)));
      return;
    }
    this.panel.setConversation(conversation);
    replace(
      this.root,
      h('p', {}, h('a', { href: '#/' }, '← all conversations')),
      h('h2', {}, `Conversation ${this.name}`),
      h(
        'p',
        { class: 'mono' },
        `uid ${conversation.metadata.uid ?? ''}, owner ${conversation.spec?.owner ?? ''}, phase ${conversation.status?.phase ?? ''}`,
      ),
      this.panel.element,
      this.paymentsPanel.element,
      h('section', {}, h('h3', {}, 'Memory'), this.memoryBox),
      h('section', {}, h('h3', {}, 'Live'), this.liveBox),
      h('section', {}, h('h3', {}, 'Turns'), this.table),
    );
    this.follow();
    this.render();
    void this.loadMemory();
  }

  /** Reads the `memory` subresource (RBAC: get conversations/memory) and shows it. */
  private async loadMemory(): Promise<void> {
    try {
      const memory = await getMemory(this.ns, this.name);
      replace(
        this.memoryBox,
        memory.entries.length === 0
          ? h('p', {}, 'Memory is empty.')
          : h(
              'table',
              {},
              h(
                'thead',
                {},
                h('tr', {}, h('th', {}, 'key'), h('th', {}, 'value'), h('th', {}, 'set at')),
              ),
              h(
                'tbody',
                {},
                ...memory.entries.map((entry) =>
                  h(
                    'tr',
                    { 'data-key': entry.key },
                    h('td', { class: 'mono' }, entry.key),
                    h('td', {}, entry.value),
                    h('td', {}, `#${String(entry.position)}, turn ${entry.turnId}`),
                  ),
                ),
              ),
            ),
      );
    } catch (error) {
      replace(this.memoryBox, h('p', { class: 'error' }, messageOf(error)));
    }
  }

  stop(): void {
    this.source?.close();
    this.source = undefined;
  }

  private follow(): void {
    const source = new EventSource(subresource(this.ns, this.name, 'log'));
    this.source = source;
    source.onopen = () => {
      this.streamNote = 'following the log stream';
      this.schedule();
    };
    source.onerror = () => {
      this.streamNote = 'the log stream dropped; reconnecting…';
      this.schedule();
    };
    source.onmessage = () => undefined;
    const committed = (e: MessageEvent<string>): void => {
      const data = JSON.parse(e.data) as { position: number; kind: string; payload: unknown };
      this.events.set(data.position, {
        position: data.position,
        kind: data.kind,
        payload: data.payload,
      });
      if (data.kind === 'memory_set' || data.kind === 'memory_cleared') void this.loadMemory();
      // An erasure (an admin's, or a memory clear's): the entry it names keeps its place
      // and kind, and loses its content here too.
      const erased = erasedBy(data);
      if (erased !== undefined) this.events.set(erased.position, erased);
      if (data.kind === 'turn_complete' || data.kind === 'turn_ambiguous') {
        const turnId = String((data.payload as { turnId?: string } | null)?.turnId ?? '');
        for (const [key, entry] of this.live) if (entry.turnId === turnId) this.live.delete(key);
      }
      this.schedule();
    };
    for (const kind of Object.values(EventKind)) source.addEventListener(kind, committed);
    source.addEventListener('delta', (e: MessageEvent<string>) => {
      const data = JSON.parse(e.data) as { turnId: string; text: string; thread?: string };
      const thread = data.thread ?? '';
      const key = JSON.stringify([data.turnId, thread]);
      const text = (this.live.get(key)?.text ?? '') + data.text;
      this.live.set(key, { turnId: data.turnId, thread, text });
      this.schedule();
    });
    source.addEventListener('error', (e) => {
      if (e instanceof MessageEvent && typeof e.data === 'string') {
        this.streamNote = `the stream ended: ${e.data.slice(0, 300)}`;
        source.close();
        this.schedule();
      }
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      this.render();
    });
  }

  private render(): void {
    this.paymentsPanel.show(this.panel.payments());
    const verified = this.panel.verifiedEvents();
    const events = verified ?? [...this.events.values()];
    replace(
      this.liveBox,
      h('p', { id: 'stream-state' }, this.streamNote, ` (${String(this.events.size)} events)`),
      ...[...this.live.values()].map(({ turnId, thread, text }) =>
        h(
          'div',
          { class: 'live', 'data-turn': turnId, 'data-thread': thread },
          h(
            'strong',
            {},
            thread === '' ? `turn ${turnId}: ` : `turn ${turnId}, thread ${thread}: `,
          ),
          text,
        ),
      ),
    );
    const rows: HTMLElement[] = [];
    const standings = standingsByTurn(events);
    const answers = finalAnswersOf(events);
    for (const group of groupByTurn(events)) {
      const standing = standings.get(group.turnId);
      const state = standing === undefined ? '' : standingLabel(standing);
      rows.push(
        h(
          'tr',
          { class: 'turn', 'data-turn': group.turnId },
          h(
            'th',
            { colspan: 5 },
            group.turnId === '' ? 'journal' : `turn ${group.turnId}`,
            state === '' ? '' : ` — ${state}`,
          ),
        ),
      );
      for (const event of group.events) rows.push(this.row(event, answers.get(group.turnId)));
    }
    replace(
      this.table,
      events.length === 0
        ? h('p', {}, 'No event yet.')
        : h(
            'table',
            {},
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                h('th', {}, '#'),
                h('th', {}, 'kind'),
                h('th', {}, 'who'),
                h('th', {}, 'what'),
                h('th', {}, 'verified'),
              ),
            ),
            h('tbody', {}, ...rows),
          ),
    );
  }

  /** One event's row; a `turn_complete` names the agent and thread of the final answer. */
  private row(event: TimelineEvent, answer: FinalAnswer | undefined): HTMLElement {
    const final = event.kind === 'turn_complete' && answer !== undefined;
    const seal: Seal = this.panel.sealOf(event.position);
    const classes = [
      seal === 'failed' ? 'failed' : '',
      event.kind === 'turn_ambiguous' ? 'quarantined' : '',
      event.excised === true ? 'excised' : '',
    ].filter((c) => c !== '');
    return h(
      'tr',
      {
        'data-position': event.position,
        'data-kind': event.kind,
        'data-seal': seal,
        // A delegate's steps indent by their thread's depth (app.css).
        'data-depth': threadOf(event).depth,
        class: classes.join(' '),
      },
      h('td', {}, event.position),
      h('td', {}, event.kind),
      h('td', {}, final && answer.agent !== '' ? answer.agent : actorOf(event)),
      h('td', {}, summaryOf(event), final ? finalAnswerNote(answer) : ''),
      h('td', {}, this.panel.sealCell(event.position, seal)),
    );
  }
}

/** The entry an erasure record on the stream names, as the timeline shows it, or undefined. */
function erasedBy(data: { kind: string; payload: unknown }): TimelineEvent | undefined {
  if (data.kind !== 'excision') return undefined;
  const p = (data.payload ?? {}) as { erased?: boolean; position?: number; erasedKind?: string };
  if (p.erased !== true) return undefined;
  const kind = p.erasedKind ?? '';
  return { position: p.position ?? 0, kind, payload: null, excised: true, erased: true };
}

export function messageOf(error: unknown): string {
  if (error instanceof HttpError) return `${String(error.status)}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
