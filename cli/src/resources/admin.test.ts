import type { WebhookDelivery } from '@xfer/shared';
import { table } from '../output.js';
import { activityQuery } from './activity.js';
import { parseServicePrincipal } from './settings.js';
import { deliveryColumns } from './webhooks.js';

test('a service principal is NAME=CLIENT_ID split at the last =; anything else is a usage error (exit 2)', () => {
  expect(parseServicePrincipal(' Nightly ETL = 0oa1b2 ')).toEqual({ name: 'Nightly ETL', client_id: '0oa1b2' });
  expect(parseServicePrincipal('a=b=c')).toEqual({ name: 'a=b', client_id: 'c' });
  for (const bad of ['no-equals', '=id', 'name=', ' = ']) {
    expect(() => parseServicePrincipal(bad)).toThrow(expect.objectContaining({ oclif: { exit: 2 }, message: expect.stringContaining(bad) }));
  }
});

test('activity flags become the query parameters of the same names, absent ones undefined', () => {
  expect(activityQuery({ action: 'user.login', 'actor-type': 'user', 'resource-id': 'r1', since: '2026-01-01T00:00:00Z' })).toEqual({
    action: 'user.login', actor_type: 'user', actor_id: undefined, resource_type: undefined, resource_id: 'r1', since: '2026-01-01T00:00:00Z', until: undefined,
  });
});

test("a delivery's LAST column is the last attempt's status code, else its error, else -", () => {
  const delivery = (attempt_log: WebhookDelivery['attempt_log']): WebhookDelivery => ({
    id: 'd1', event: 'file.uploaded', event_id: 'e1', status: 'pending', attempts: attempt_log.length, next_attempt_at: null,
    created_at: '2026-01-01T00:00:00.000Z', delivered_at: null, attempt_log,
  });
  const at = '2026-01-01T00:00:00.000Z';
  const rows = [
    delivery([]),
    delivery([{ n: 1, at, status_code: 500, duration_ms: 3, error: 'HTTP 500' }]),
    delivery([{ n: 1, at, status_code: 500, duration_ms: 3, error: null }, { n: 2, at, status_code: null, duration_ms: null, error: 'ECONNREFUSED' }]),
  ];
  expect(table(rows, deliveryColumns).split('\n').map((l) => l.split(/ {2,}/)[4])).toEqual(['LAST', '-', '500', 'ECONNREFUSED']);
});
