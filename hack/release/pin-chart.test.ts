/**
 * The released chart's values pinned to the release (hack/release/pin-chart.ts): the real
 * charts/polychrome with the pinned values, rendered by the pinned Helm, names every image
 * by the digest given and nothing at registry.invalid; what does not fit is refused, named.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { helm } from '../chart/chart-testing';
import { repoRoot } from '../lib/paths';
import { pinChartValues } from './pin-chart';

const work = mkdtempSync(join(tmpdir(), 'polychrome-pin-chart-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const values = readFileSync(join(repoRoot, 'charts', 'polychrome', 'values.yaml'), 'utf8');
const registry = 'ghcr.io/acme/polychrome';
const digest = (c: string): string => `sha256:${c.repeat(64)}`;
const refs = [
  `${registry}/control-plane@${digest('a')}`,
  `${registry}/state@${digest('b')}`,
  `${registry}/harness@${digest('c')}`,
];

describe('pinChartValues', () => {
  it('sets image.registry and each plane digest, keeping every comment and other value', () => {
    const pinned = pinChartValues(values, refs);
    const v = parse(pinned) as Record<string, { image: Record<string, string> }>;
    expect(v['image']).toEqual({ registry, tag: '' });
    expect(v['controlPlane']?.image).toEqual({ repository: 'control-plane', digest: digest('a') });
    expect(v['state']?.image).toEqual({ repository: 'state', digest: digest('b') });
    expect(v['harness']?.image).toEqual({ repository: 'harness', digest: digest('c') });
    const comments = (text: string): string[] =>
      text.split('\n').filter((l) => l.trim().startsWith('#'));
    expect(comments(pinned)).toEqual(comments(values));
    const rest = (text: string): unknown => {
      const o = parse(text) as Record<string, { registry?: string; image: { digest?: string } }>;
      delete o['image']?.registry;
      for (const k of ['controlPlane', 'state', 'harness']) delete o[k]?.image.digest;
      return o;
    };
    expect(rest(pinned)).toEqual(rest(values));
  });

  it('makes the chart render every image by its digest, none at registry.invalid', () => {
    const chart = join(work, 'polychrome');
    cpSync(join(repoRoot, 'charts', 'polychrome'), chart, { recursive: true });
    writeFileSync(join(chart, 'values.yaml'), pinChartValues(values, refs));
    // With every part on, so the sandbox's and the door's images are rendered too.
    const out = helm([
      'template',
      'polychrome',
      chart,
      '--namespace',
      'polychrome-system',
      '--set',
      'kubeApi.enabled=true,conversations.create=true',
    ]);
    expect(out).not.toContain('registry.invalid');
    const images = [...out.matchAll(/\b(?:image|value): "?(ghcr\.io[^\s"]+)/gu)].map((m) => m[1]);
    expect(new Set(images)).toEqual(new Set(refs));
    expect(helm(['lint', '--strict', chart])).toContain('0 chart(s) failed');
  });

  it('refuses references that are not pinned, not of the plane, or under two registries', () => {
    expect(() => pinChartValues(values, refs.slice(0, 2))).toThrow(
      'expected 3 image references (control-plane, state, harness), got 2',
    );
    expect(() =>
      pinChartValues(values, [`${registry}/control-plane:0.1.0`, ...refs.slice(1)]),
    ).toThrow(`'${registry}/control-plane:0.1.0' is not an image pinned by digest`);
    expect(() => pinChartValues(values, [refs[1] ?? '', refs[0] ?? '', refs[2] ?? ''])).toThrow(
      "is not in the repository controlPlane.image.repository names ('control-plane')",
    );
    expect(() =>
      pinChartValues(values, [refs[0] ?? '', `other.io/x/state@${digest('b')}`, refs[2] ?? '']),
    ).toThrow(`the images are under different registries: ${registry}, other.io/x`);
    expect(() => pinChartValues('image: {}\n', refs)).toThrow(
      "the chart's values.yaml has no controlPlane.image.repository",
    );
  });
});
