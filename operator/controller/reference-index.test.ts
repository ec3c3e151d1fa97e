import { describe, expect, it } from '@jest/globals';
import { ReferenceIndex } from './reference-index';

describe('ReferenceIndex', () => {
  it('finds referrers by what they name, and forgets what they no longer name', () => {
    const index = new ReferenceIndex();
    index.set('ns/triage', ['ns/billing', 'ns/search']);
    index.set('ns/sales', ['ns/billing']);
    expect(index.referrers('ns/billing').sort()).toEqual(['ns/sales', 'ns/triage']);
    index.set('ns/triage', ['ns/search']);
    expect(index.referrers('ns/billing')).toEqual(['ns/sales']);
    expect(index.referrers('ns/search')).toEqual(['ns/triage']);
    index.delete('ns/sales');
    expect(index.referrers('ns/billing')).toEqual([]);
    expect(index.referrers('other/billing')).toEqual([]);
  });
});
