import fc from 'fast-check';
import { isTimeZone, parseTemplate, render, renderTemplate, TemplateError, templateUses } from './templates.js';

const params = new Map([['env', 'prod'], ['bucket_1', 'b1']]);

describe('templates', () => {
  test('every variable renders; text around them is kept', () => {
    const now = new Date('2026-03-05T07:08:09Z');
    expect(render('/out/{{params.env}}/{{date:YYYY-MM-DD}}/{{ run.id }}-{{file.name}}', { params, now, runId: 'r1', file: { name: 'a.csv', path: '/in/a.csv' } }))
      .toBe('/out/prod/2026-03-05/r1-a.csv');
    expect(render('{{file.path}}', { file: { name: 'a.csv', path: '/in/a.csv' } })).toBe('/in/a.csv');
    expect(render('{{date:YYYYMMDDTHHmmss}}', { now })).toBe('20260305T070809');
    expect(render('plain/path', {})).toBe('plain/path');
  });

  test('the date is the wall clock of the time zone, across a DST change (Europe/Berlin)', () => {
    // 2026-03-29 01:00 UTC: Berlin goes from 02:00 CET to 03:00 CEST.
    expect(render('{{date:YYYY-MM-DD HH:mm}}', { now: new Date('2026-03-29T00:59:00Z'), timezone: 'Europe/Berlin' })).toBe('2026-03-29 01:59');
    expect(render('{{date:YYYY-MM-DD HH:mm}}', { now: new Date('2026-03-29T01:00:00Z'), timezone: 'Europe/Berlin' })).toBe('2026-03-29 03:00');
    // Midnight is 00, never 24.
    expect(render('{{date:HH}}', { now: new Date('2026-06-30T22:00:00Z'), timezone: 'Europe/Berlin' })).toBe('00');
    expect(render('{{date:DD}}', { now: new Date('2026-06-30T23:30:00Z'), timezone: 'Asia/Kolkata' })).toBe('01');
  });

  test('uses lists parameters once each, and what the template needs', () => {
    expect(templateUses(parseTemplate('{{params.a}}/{{params.b}}/{{params.a}}'))).toEqual({ params: ['a', 'b'], date: false, run: false, file: false });
    expect(templateUses(parseTemplate('{{date:YYYY}}{{run.id}}{{file.name}}'))).toEqual({ params: [], date: true, run: true, file: true });
  });

  test.each([
    ['/a/{{params.env', /without "}}"/],
    ['/a/}}', /without "{{"/],
    ['{{ {{params.a}} }}', /inside a variable/],
    ['{{params.1bad}}', /invalid parameter name/],
    ['{{params.}}', /invalid parameter name/],
    ['{{env}}', /unknown variable \{\{env\}\}/],
    ['{{date:YYYY%MM}}', /invalid date format/],
    ['{{date:}}', /without a token/],
    ['{{date:--}}', /without a token/],
    ['x'.repeat(5000), /longer than/],
  ])('%s does not parse', (template, message) => {
    expect(() => parseTemplate(template)).toThrow(TemplateError);
    expect(() => parseTemplate(template)).toThrow(message);
  });

  test('a variable without its value fails the render, naming it', () => {
    expect(() => render('{{params.missing}}', { params })).toThrow(/parameter "missing", which does not exist/);
    expect(() => render('{{run.id}}', {})).toThrow(/outside a run/);
    expect(() => render('{{file.name}}', {})).toThrow(/only a watcher's run has/);
    expect(() => render('{{date:YYYY}}', { timezone: 'Mars/Olympus' })).toThrow(/unknown time zone "Mars\/Olympus"/);
  });

  test('time zones: IANA names and UTC are known, others are not', () => {
    expect(isTimeZone('UTC')).toBe(true);
    expect(isTimeZone('Europe/Berlin')).toBe(true);
    expect(isTimeZone('America/Argentina/Buenos_Aires')).toBe(true);
    expect(isTimeZone('Mars/Olympus')).toBe(false);
    expect(isTimeZone('')).toBe(false);
  });

  test('property: text without braces renders as itself; a value is inserted as text, never parsed again', () => {
    const text = fc.string({ maxLength: 200 }).filter((s) => !s.includes('{{') && !s.includes('}}'));
    fc.assert(fc.property(text, (s) => render(s, {}) === s));
    // (A `{` just before the variable would make it `{{{`, another variable name.)
    fc.assert(fc.property(text.filter((s) => !s.endsWith('{')), fc.string({ maxLength: 50 }), text, (before, value, after) =>
      renderTemplate(parseTemplate(`${before}{{params.v}}${after}`), { params: new Map([['v', value]]) }) === `${before}${value}${after}`));
  });

  test('property: parsing any string either succeeds or throws a TemplateError, nothing else', () => {
    fc.assert(fc.property(fc.string({ maxLength: 100, unit: fc.constantFrom('{', '}', 'a', '.', ':', 'p', 'params.', 'date:', 'YYYY', ' ') }), (s) => {
      try {
        parseTemplate(s);
      } catch (err) {
        return err instanceof TemplateError;
      }
      return true;
    }));
  });
});
