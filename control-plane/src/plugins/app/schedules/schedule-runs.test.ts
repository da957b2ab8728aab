import { Types } from 'mongoose';
import { runStatus, STALE_START_MS } from './schedule-runs.js';

const now = new Date('2026-06-01T12:00:00Z');
const ago = (ms: number) => new Date(now.getTime() - ms);
const transferId = new Types.ObjectId();

describe('runStatus: what a run shows', () => {
  test('a started run shows its transfer as it is now, with the error of a failed one', () => {
    const run = { state: 'started' as const, error: null, started_at: ago(1000), transfer_id: transferId };
    expect(runStatus(run, { status: 'in-progress', error: null }, now)).toEqual({ status: 'in-progress', error: null });
    expect(runStatus(run, { status: 'failed', error: 'disk full' }, now)).toEqual({ status: 'failed', error: 'disk full' });
    expect(runStatus(run, null, now)).toEqual({ status: 'unknown', error: `its transfer ${String(transferId)} was deleted` });
  });

  test('skipped and failed runs keep their reason', () => {
    expect(runStatus({ state: 'skipped', error: 'busy', started_at: ago(0), transfer_id: null }, null, now)).toEqual({ status: 'skipped', error: 'busy' });
    expect(runStatus({ state: 'failed', error: 'no such parameter', started_at: ago(0), transfer_id: null }, null, now)).toEqual({ status: 'failed', error: 'no such parameter' });
  });

  test('a run still starting is queued, until it is older than a dead instance would leave it: then failed', () => {
    expect(runStatus({ state: 'starting', error: null, started_at: ago(STALE_START_MS - 1), transfer_id: null }, null, now)).toEqual({ status: 'queued', error: null });
    expect(runStatus({ state: 'starting', error: null, started_at: ago(STALE_START_MS + 1), transfer_id: null }, null, now).status).toBe('failed');
  });
});
