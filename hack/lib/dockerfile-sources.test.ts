import { describe, expect, it } from '@jest/globals';

import { contextCopies } from './dockerfile-sources';

describe('contextCopies', () => {
  it('takes every COPY and ADD source from the context, and none of a --from copy', () => {
    const dockerfile = [
      'FROM node:22 AS build',
      'COPY package.json package-lock.json ./',
      'copy --chown=0:0 --link ./common ./common',
      'ADD ["docs/api/openapi.json", "/src/docs/api/openapi.json"]',
      'FROM scratch',
      'COPY --from=build /src/dist ./dist',
      'COPY --chown=0:0 --from=build /src/node_modules ./node_modules',
      'COPY --chown=0:0 /harness/model/demo-script.yaml ./model/',
    ].join('\n');
    expect(contextCopies(dockerfile, 'Dockerfile')).toEqual([
      { line: 2, instruction: 'COPY', sources: ['package.json', 'package-lock.json'] },
      { line: 3, instruction: 'COPY', sources: ['common'] },
      { line: 4, instruction: 'ADD', sources: ['docs/api/openapi.json'] },
      { line: 8, instruction: 'COPY', sources: ['harness/model/demo-script.yaml'] },
    ]);
  });

  it('joins continued lines and skips comments and blank lines inside them', () => {
    const dockerfile = [
      '# COPY secrets ./ is a comment',
      'RUN echo COPY x y',
      'COPY \\',
      '  # a comment inside the instruction',
      '  ui \\',
      '',
      '  hack/build-ui.ts ./',
    ].join('\n');
    expect(contextCopies(dockerfile, 'Dockerfile')).toEqual([
      { line: 3, instruction: 'COPY', sources: ['ui', 'hack/build-ui.ts'] },
    ]);
  });

  it('reads . as the whole context and leaves URLs to ADD', () => {
    expect(contextCopies('COPY . /src\nADD https://example.com/a.tgz ./\n', 'Dockerfile')).toEqual([
      { line: 1, instruction: 'COPY', sources: ['.'] },
    ]);
  });

  it.each([
    ['COPY *.json ./', 'Dockerfile:1: source "*.json" holds a wildcard or a variable'],
    ['COPY $DIR ./', 'Dockerfile:1: source "$DIR" holds a wildcard or a variable'],
    ['COPY <<EOF /x\nhi\nEOF', 'Dockerfile:1: a heredoc source is not supported'],
    ['COPY onlyone', 'Dockerfile:1: COPY needs at least one source and a destination'],
    ['COPY ["a", 1]', 'Dockerfile:1: the JSON form is not a valid JSON array of strings'],
    ['# escape=`\nCOPY a b', 'Dockerfile:1: an escape directive other than \\'],
  ])('refuses what it cannot check, naming the line: %j', (dockerfile, message) => {
    expect(() => contextCopies(dockerfile, 'Dockerfile')).toThrow(message);
  });
});
