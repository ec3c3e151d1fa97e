import { describe, expect, it } from '@jest/globals';
import { fileCircles, folderCircles, importGraph, reexportedImports } from './import-graph';

const notATest = (file: string): boolean => !file.endsWith('.test.ts');

describe('importGraph', () => {
  it('follows value, type-only, re-export and dynamic imports to the files they name', () => {
    const graph = importGraph(
      new Map([
        [
          'a/main.ts',
          [
            "import { b } from './b';",
            "import type { C } from '../c/c';",
            "export { d } from './d/index';",
            "export type { E } from './e.js';",
            "const lazy = () => import('./lazy');",
            "import { readFileSync } from 'node:fs';",
            "import pino from 'pino';",
            "import './missing';",
          ].join('\n'),
        ],
        ['a/b.ts', ''],
        ['c/c.ts', ''],
        ['a/d/index.ts', ''],
        ['a/e.ts', ''],
        ['a/lazy.ts', ''],
      ]),
    );
    expect(graph.get('a/main.ts')).toEqual([
      'a/b.ts',
      'c/c.ts',
      'a/d/index.ts',
      'a/e.ts',
      'a/lazy.ts',
    ]);
    expect(graph.get('a/b.ts')).toEqual([]);
  });

  it('resolves a folder import to its index', () => {
    const graph = importGraph(
      new Map([
        ['x/user.ts', "import { v } from '../api/v1';"],
        ['api/v1/index.ts', ''],
      ]),
    );
    expect(graph.get('x/user.ts')).toEqual(['api/v1/index.ts']);
  });
});

describe('fileCircles', () => {
  it('finds a circle made of type-only imports', () => {
    const graph = importGraph(
      new Map([
        ['t/view.ts', "import type { State } from './state';\nexport interface View {}"],
        ['t/state.ts', "import type { View } from './view';\nexport interface State {}"],
        ['t/leaf.ts', "import type { View } from './view';"],
      ]),
    );
    expect(fileCircles(graph)).toEqual([['t/state.ts', 't/view.ts', 't/state.ts']]);
  });

  it('names a longer circle in import order, once, from its first file', () => {
    const graph = new Map([
      ['c.ts', ['a.ts']],
      ['a.ts', ['b.ts', 'x.ts']],
      ['b.ts', ['c.ts']],
      ['x.ts', []],
    ]);
    expect(fileCircles(graph)).toEqual([['a.ts', 'b.ts', 'c.ts', 'a.ts']]);
  });

  it('reports each separate circle and nothing for a graph without one', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['a.ts']],
      ['m.ts', ['n.ts']],
      ['n.ts', ['m.ts', 'a.ts']],
    ]);
    expect(fileCircles(graph)).toEqual([
      ['a.ts', 'b.ts', 'a.ts'],
      ['m.ts', 'n.ts', 'm.ts'],
    ]);
    expect(
      fileCircles(
        new Map([
          ['a.ts', ['b.ts', 'c.ts']],
          ['b.ts', ['c.ts']],
          ['c.ts', []],
        ]),
      ),
    ).toEqual([]);
  });
});

describe('folderCircles', () => {
  it('finds folders that import each other though no file circle exists', () => {
    const graph = new Map([
      ['turn/machine.ts', ['server/codec.ts']],
      ['server/codec.ts', []],
      ['server/server.ts', ['turn/machine.ts']],
    ]);
    expect(fileCircles(graph)).toEqual([]);
    expect(folderCircles(graph, notATest)).toEqual([['server', 'turn', 'server']]);
  });

  it('leaves out what is not production code, and imports within a folder', () => {
    const graph = new Map([
      ['lib/thing.ts', ['lib/other.ts']],
      ['lib/other.ts', []],
      ['lib/thing.test.ts', ['support/fixture.ts']],
      ['support/fixture.ts', ['lib/thing.ts']],
    ]);
    expect(folderCircles(graph, notATest)).toEqual([]);
    expect(folderCircles(graph, () => true)).toEqual([['lib', 'support', 'lib']]);
  });
});

describe('reexportedImports', () => {
  it('finds a project name imported and exported again, under any name', () => {
    const text = [
      "import type { Mount } from './runtime';",
      "import { Role as CallerRole, other } from '../common/roles';",
      "import Default from './default';",
      'export type { Mount };',
      'export { CallerRole as Role, Default };',
    ].join('\n');
    expect(reexportedImports('a.ts', text)).toEqual(['Mount', 'CallerRole', 'Default']);
  });

  it('leaves a facade over a package and a module’s own names alone', () => {
    const text = [
      "import { SpanKind } from '@opentelemetry/api';",
      "import { helper } from './helper';",
      'const own = helper();',
      'export { SpanKind, own };',
    ].join('\n');
    expect(reexportedImports('a.ts', text)).toEqual([]);
  });
});
