/**
 * Small DOM helpers: elements are built with text nodes only (never innerHTML), so nothing
 * a journal holds can become markup.
 */
type Child = Node | string | number | null | undefined | false;
type Attrs = Readonly<Record<string, string | number | boolean | undefined>>;

/** An element with attributes (`class`, `data-*`, ...) and children (strings become text). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: readonly Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    element.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    element.append(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** Replaces the children of `parent`. */
export function replace(parent: Element, ...children: readonly Child[]): void {
  parent.replaceChildren();
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

/** A button that runs `action` on click. */
export function button(label: string, action: () => void, attrs: Attrs = {}): HTMLButtonElement {
  const b = h('button', { type: 'button', ...attrs }, label);
  b.addEventListener('click', action);
  return b;
}
