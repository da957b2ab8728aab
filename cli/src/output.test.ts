import { record, table, TableWriter } from './output.js';

test('table aligns columns under upper-case headers, shows null as -, and keeps each row on one line', () => {
  const rows = [{ id: 'a1', name: 'short', host: null }, { id: 'b22', name: 'a\nlonger name', host: 'h' }];
  const text = table(rows, [
    { header: 'id', get: (r) => r.id }, { header: 'name', get: (r) => r.name }, { header: 'host', get: (r) => r.host },
  ]);
  expect(text.split('\n')).toEqual([
    'ID   NAME           HOST',
    'a1   short          -',
    'b22  a longer name  h',
  ]);
});

test('record prints one key: value line per field, objects as JSON', () => {
  expect(record({ id: 'x', options: { secure: false }, agent_id: null })).toBe('id:       x\noptions:  {"secure":false}\nagent_id: -');
});

test('a table written page by page has one header, and the widths of the first page', () => {
  const w = new TableWriter<{ id: string; name: string }>([{ header: 'id', get: (r) => r.id }, { header: 'name', get: (r) => r.name }]);
  expect(w.page([{ id: 'a1', name: 'x' }]).split('\n')).toEqual(['ID  NAME', 'a1  x']);
  expect(w.page([{ id: 'b2', name: 'yy' }, { id: 'long-id', name: 'z' }]).split('\n')).toEqual(['b2  yy', 'long-id  z']);
});
