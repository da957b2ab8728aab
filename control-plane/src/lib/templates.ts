/**
 * The template language of paths (scope-areas.md "Global parameters"): a transfer's, a watcher's
 * and a workflow's paths may hold `{{params.NAME}}`, `{{date:FORMAT}}`, `{{run.id}}`,
 * `{{file.name}}` and `{{file.path}}`. Everything else is literal text.
 *
 * Parsing is separate from rendering so that a template is checked when it is stored (syntax,
 * unknown variables, parameters that do not exist) and rendered when it runs (the date of the
 * run, the run's id, the watcher's file). Rendering never evaluates anything: a value is inserted
 * as text, and a value that contains `{{` is not parsed again.
 *
 * Why our own: the language is five variables and a date format; a general template engine
 * (Handlebars, Liquid) brings helpers, partials and escaping rules a path must not have, and its
 * errors do not name our fields.
 */

/**
 * A value that takes a template's place but is never parsed (docs/security.md "Templates: data is
 * never code"): a path a watcher's agent reported, say. Only what the account's user wrote (a
 * stored transfer, watcher or workflow definition, a request's body) is a template; anything the
 * platform or an outside party supplies goes in as a Literal and comes out as the same text, `{{`
 * included. A class, not a flag: a request body (JSON) cannot make one, and a string passed where
 * a Literal is meant is a type error at the caller, not a template.
 */
export class Literal {
  constructor(readonly text: string) {}
}

/** A parameter name (scope-areas.md): a letter or `_`, then up to 63 letters, digits or `_`. */
export const PARAMETER_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** The tokens of `{{date:FORMAT}}`, longest first so `mm` never eats part of a longer token. */
const DATE_TOKENS = ['YYYY', 'MM', 'DD', 'HH', 'mm', 'ss'] as const;
type DateToken = (typeof DATE_TOKENS)[number];
/** What may stand between date tokens: separators a path can hold on every connector. */
const DATE_LITERAL = /^[-_.:/ T]$/;

export type TemplatePart =
  | { kind: 'text'; text: string }
  | { kind: 'param'; name: string }
  | { kind: 'date'; format: (DateToken | { literal: string })[] }
  | { kind: 'run.id' }
  | { kind: 'file.name' }
  | { kind: 'file.path' };

/** A template that cannot be parsed or rendered; the message names what is wrong, not the field. */
export class TemplateError extends Error {
  override readonly name = 'TemplateError';
}

const MAX_TEMPLATE = 4096;

/** Parses a template into parts; throws TemplateError on bad syntax or an unknown variable. */
export function parseTemplate(template: string): TemplatePart[] {
  if (template.length > MAX_TEMPLATE) throw new TemplateError(`is longer than ${MAX_TEMPLATE} characters`);
  const parts: TemplatePart[] = [];
  let at = 0;
  while (at < template.length) {
    const open = template.indexOf('{{', at);
    const close = template.indexOf('}}', at);
    if (close !== -1 && (open === -1 || close < open)) throw new TemplateError(`has "}}" without "{{" at position ${close}`);
    if (open === -1) {
      parts.push({ kind: 'text', text: template.slice(at) });
      break;
    }
    if (open > at) parts.push({ kind: 'text', text: template.slice(at, open) });
    const end = template.indexOf('}}', open + 2);
    if (end === -1) throw new TemplateError(`has "{{" without "}}" at position ${open}`);
    const expression = template.slice(open + 2, end).trim();
    if (expression.includes('{{')) throw new TemplateError(`has "{{" inside a variable at position ${open}`);
    parts.push(variable(expression));
    at = end + 2;
  }
  return parts;
}

function variable(expression: string): TemplatePart {
  if (expression === 'run.id') return { kind: 'run.id' };
  if (expression === 'file.name') return { kind: 'file.name' };
  if (expression === 'file.path') return { kind: 'file.path' };
  if (expression.startsWith('params.')) {
    const name = expression.slice('params.'.length);
    if (!PARAMETER_NAME.test(name)) throw new TemplateError(`has an invalid parameter name in {{${expression}}}`);
    return { kind: 'param', name };
  }
  if (expression.startsWith('date:')) return { kind: 'date', format: dateFormat(expression.slice('date:'.length)) };
  throw new TemplateError(`has an unknown variable {{${expression}}} (known: params.NAME, date:FORMAT, run.id, file.name, file.path)`);
}

function dateFormat(format: string): (DateToken | { literal: string })[] {
  const out: (DateToken | { literal: string })[] = [];
  let i = 0;
  while (i < format.length) {
    const token = DATE_TOKENS.find((t) => format.startsWith(t, i));
    if (token) {
      out.push(token);
      i += token.length;
    } else if (DATE_LITERAL.test(format[i]!)) {
      out.push({ literal: format[i]! });
      i += 1;
    } else {
      throw new TemplateError(`has an invalid date format "${format}" (tokens YYYY MM DD HH mm ss, separated by - _ . : / space or T)`);
    }
  }
  if (!out.some((p) => typeof p === 'string')) throw new TemplateError(`has a date format without a token: "${format}"`);
  return out;
}

/** What a template uses: the parameter names it names, and whether it needs a run or a file. */
export interface TemplateUses {
  params: string[];
  date: boolean;
  run: boolean;
  file: boolean;
}

/** The variables of a parsed template (parameters once each, in order of first use). */
export function templateUses(parts: TemplatePart[]): TemplateUses {
  const params = [...new Set(parts.flatMap((p) => (p.kind === 'param' ? [p.name] : [])))];
  return {
    params,
    date: parts.some((p) => p.kind === 'date'),
    run: parts.some((p) => p.kind === 'run.id'),
    file: parts.some((p) => p.kind === 'file.name' || p.kind === 'file.path'),
  };
}

/** What a render may insert. A variable whose value is missing fails the render, naming it. */
export interface TemplateContext {
  /** Parameter values by name (the account's parameters, a run's own overriding them). */
  params?: ReadonlyMap<string, string>;
  /** The instant `{{date:…}}` shows, in `timezone` (default UTC). */
  now?: Date;
  /** IANA time zone of `{{date:…}}` (a schedule's), default `UTC`. */
  timezone?: string;
  runId?: string;
  file?: { name: string; path: string };
}

/** Renders parsed parts; throws TemplateError naming a variable that has no value here. */
export function renderTemplate(parts: TemplatePart[], ctx: TemplateContext): string {
  let dateParts: Record<DateToken, string> | null = null;
  let out = '';
  for (const part of parts) {
    switch (part.kind) {
      case 'text':
        out += part.text;
        break;
      case 'param': {
        const value = ctx.params?.get(part.name);
        if (value === undefined) throw new TemplateError(`names the parameter "${part.name}", which does not exist`);
        out += value;
        break;
      }
      case 'date':
        dateParts ??= zonedParts(ctx.now ?? new Date(), ctx.timezone ?? 'UTC');
        for (const p of part.format) out += typeof p === 'string' ? dateParts[p] : p.literal;
        break;
      case 'run.id':
        if (ctx.runId === undefined) throw new TemplateError('uses {{run.id}} outside a run');
        out += ctx.runId;
        break;
      case 'file.name':
      case 'file.path':
        if (!ctx.file) throw new TemplateError(`uses {{${part.kind}}}, which only a watcher's run has`);
        out += part.kind === 'file.name' ? ctx.file.name : ctx.file.path;
        break;
    }
  }
  return out;
}

/** Parses and renders in one step (a template already checked when it was stored). */
export function render(template: string, ctx: TemplateContext): string {
  return renderTemplate(parseTemplate(template), ctx);
}

/** Whether `timezone` is an IANA time zone this runtime knows (`UTC` included). */
export function isTimeZone(timezone: string): boolean {
  if (timezone.length === 0 || timezone.length > 64) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    return true;
  } catch {
    return false;
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The wall-clock fields of `at` in `timezone`, zero-padded. */
function zonedParts(at: Date, timezone: string): Record<DateToken, string> {
  let format = formatters.get(timezone);
  if (!format) {
    if (!isTimeZone(timezone)) throw new TemplateError(`uses the unknown time zone "${timezone}"`);
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
    });
    formatters.set(timezone, format);
  }
  const got = Object.fromEntries(format.formatToParts(at).map((p) => [p.type, p.value]));
  return { YYYY: got.year!.padStart(4, '0'), MM: got.month!, DD: got.day!, HH: got.hour!, mm: got.minute!, ss: got.second! };
}
