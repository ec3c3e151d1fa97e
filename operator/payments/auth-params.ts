/**
 * A reader for HTTP authentication challenges (RFC 9110 §11.6.1): `scheme param=value,
 * param="quoted value", ..., scheme2 ...`, as one `WWW-Authenticate` value or several
 * joined with commas. Pure. Returns each challenge's scheme and parameters, or a problem
 * naming what is malformed.
 */
export interface AuthChallenge {
  readonly scheme: string;
  readonly params: ReadonlyMap<string, string>;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+/;

/** Parses the challenges of a header value; throws an Error naming the first problem. */
export function parseAuthChallenges(header: string): AuthChallenge[] {
  const challenges: { scheme: string; params: Map<string, string> }[] = [];
  let rest = header;
  const skip = (pattern: RegExp): void => {
    rest = rest.replace(pattern, '');
  };
  skip(/^[\s,]+/);
  while (rest !== '') {
    const token = TOKEN.exec(rest)?.[0];
    if (token === undefined) throw new Error(`unexpected "${rest.slice(0, 12)}"`);
    rest = rest.slice(token.length);
    skip(/^[ \t]*/);
    if (!rest.startsWith('=')) {
      challenges.push({ scheme: token, params: new Map() });
      skip(/^[\s,]+/);
      continue;
    }
    const current = challenges.at(-1);
    if (current === undefined) throw new Error(`parameter ${token} comes before any scheme`);
    rest = rest.slice(1);
    skip(/^[ \t]*/);
    const name = token.toLowerCase();
    if (current.params.has(name)) throw new Error(`parameter ${name} appears twice`);
    current.params.set(name, readValue());
    skip(/^[ \t]*/);
    if (rest !== '' && !rest.startsWith(','))
      throw new Error(`parameter ${name} is not followed by a comma`);
    skip(/^[\s,]+/);
  }
  return challenges;

  function readValue(): string {
    if (!rest.startsWith('"')) {
      const value = /^[!#$%&'*+.^_`|~0-9A-Za-z/=-]+/.exec(rest)?.[0];
      if (value === undefined) throw new Error('a parameter has no value');
      rest = rest.slice(value.length);
      return value;
    }
    let value = '';
    for (let i = 1; i < rest.length; i += 1) {
      const c = rest[i];
      if (c === '\\') {
        value += rest[i + 1] ?? '';
        i += 1;
      } else if (c === '"') {
        rest = rest.slice(i + 1);
        return value;
      } else {
        value += c;
      }
    }
    throw new Error('a quoted value is not closed');
  }
}
