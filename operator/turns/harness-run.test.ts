import { describe, expect, it } from '@jest/globals';
import { AppError } from '../../common/errors';
import { HARNESS_BUSY, retryWhileBusy } from './harness-run';
import { JournalRolledBackError } from './journal-checkpoint';

describe('retryWhileBusy', () => {
  const busy = new AppError('failed_precondition', 'the harness is running turn t-1', {
    details: { runningTurn: 't-1', conversation: 'c-1' },
  });

  it('calls a harness that still runs an earlier call again, until the retries are used up', () => {
    expect(retryWhileBusy(busy, 0)).toBe(true);
    expect(retryWhileBusy(busy, HARNESS_BUSY.retries - 1)).toBe(true);
    expect(retryWhileBusy(busy, HARNESS_BUSY.retries)).toBe(false);
  });

  it('does not call the harness again for a journal rolled back under a step', () => {
    const rolledBack = new JournalRolledBackError('c-1', {
      checkpointHead: 9,
      checkpointRoot: 'ab'.repeat(32),
      journalHead: 4,
    });
    expect(rolledBack.code).toBe('failed_precondition');
    expect(retryWhileBusy(rolledBack, 0)).toBe(false);
  });

  it('does not retry another refusal, or a precondition that names no running turn', () => {
    expect(retryWhileBusy(new AppError('failed_precondition', 'something else'), 0)).toBe(false);
    expect(retryWhileBusy(new AppError('unavailable', 'no harness'), 0)).toBe(false);
    expect(retryWhileBusy(new Error('plain'), 0)).toBe(false);
  });
});
