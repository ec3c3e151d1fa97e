import { describe, expect, it } from '@jest/globals';
import { effectiveMaxSteps, type StepBudget } from './step-budget';

describe('effectiveMaxSteps', () => {
  it.each<[string, StepBudget, number]>([
    ['nothing set: the default', {}, 8],
    ['deployment config replaces the default', { deployment: 12 }, 12],
    ['spec lower than default', { conversation: 3 }, 3],
    ['spec cannot raise the default', { conversation: 20 }, 8],
    ['directive lower than spec', { conversation: 5, directive: 2 }, 2],
    ['spec lower than directive', { conversation: 2, directive: 5 }, 2],
    ['lowest of all three wins', { deployment: 6, conversation: 4, directive: 5 }, 4],
    ['deployment lowest', { deployment: 1, conversation: 4, directive: 5 }, 1],
    ['0 means unset', { deployment: 0, conversation: 0, directive: 0 }, 8],
  ])('%s', (_name, budget, expected) => {
    expect(effectiveMaxSteps(budget)).toBe(expected);
  });

  it.each<[StepBudget, string]>([
    [{ directive: -1 }, 'step budget: directive limit -1 is not a positive integer'],
    [{ conversation: 2.5 }, 'step budget: conversation limit 2.5 is not a positive integer'],
  ])('rejects %j', (budget, message) => {
    expect(() => effectiveMaxSteps(budget)).toThrow(message);
  });
});
