/**
 * An error as the one stderr line every failure of the CLI prints: `Error: <message>`, or
 * `{"error": …}` with --json. oclif's messages span lines (and end with "See more help with
 * --help"); one line keeps logs greppable.
 */
export function errorLine(message: string, json: boolean): string {
  const text = message.replace(/\u001b\[[0-9;]*m/g, '').split('\n').map((l) => l.trim()).filter(Boolean).join(' ');
  return (json ? JSON.stringify({ error: text }) : `Error: ${text}`) + '\n';
}

/** A column of a table: the header and how to show a row's value. */
export interface Column<T> { header: string; get: (row: T) => unknown }

function cell(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value).replace(/[\r\n\t]+/g, ' ');
}

/** Rows as a left-aligned text table with a header line. */
export function table<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  return new TableWriter(columns).page(rows);
}

/**
 * A table written a page at a time (lists with --all, which may be too long to hold): the column
 * widths are fixed by the header and the first page; a longer cell later pushes its line only.
 */
export class TableWriter<T> {
  private widths: number[] | undefined;

  constructor(private readonly columns: readonly Column<T>[]) {}

  /** The page's lines, preceded by the header on the first page. */
  page(rows: readonly T[]): string {
    const cells = rows.map((row) => this.columns.map((c) => cell(c.get(row))));
    const first = this.widths === undefined;
    const widths = this.widths ??= this.columns.map((c, i) => Math.max(c.header.length, ...cells.map((r) => r[i]!.length)));
    const line = (values: readonly string[]) => values.map((v, i) => v.padEnd(widths[i]!)).join('  ').trimEnd();
    const lines = cells.map(line);
    if (first) lines.unshift(line(this.columns.map((c) => c.header.toUpperCase())));
    return lines.join('\n');
  }
}

/** One record as `key: value` lines. */
export function record(obj: Readonly<Record<string, unknown>>): string {
  const width = Math.max(...Object.keys(obj).map((k) => k.length));
  return Object.entries(obj).map(([k, v]) => `${(k + ':').padEnd(width + 1)} ${cell(v)}`).join('\n');
}
