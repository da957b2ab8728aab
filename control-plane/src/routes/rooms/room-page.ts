import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RoomView } from '@xfer/shared';

/**
 * The small server-rendered page an invited member's browser gets at its invite URL: the room's
 * files with download links and, for a contributor, an upload form. No script at all; the one
 * inline style is allowed by its hash, and nothing else may load (docs/security.md "Credentials the API accepts").
 */

const STYLE = [
  'body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f}',
  'h1{font-size:1.5rem;margin-bottom:.25rem}',
  '.muted{color:#6e6e73}',
  'table{border-collapse:collapse;width:100%;margin:1rem 0}',
  'th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid #ddd}',
  '.size{text-align:right;white-space:nowrap}',
  '.notice{background:#e8f5e9;border:1px solid #a5d6a7;padding:.5rem .75rem}',
  '.error{background:#fdecea;border:1px solid #f5a6a0;padding:.5rem .75rem}',
  'form{margin-top:1.5rem;padding:1rem;border:1px solid #ddd}',
].join('');
const STYLE_HASH = `'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`;

/** The page's policy: nothing loads or runs but its own hashed style; forms post back here only. */
export const ROOM_PAGE_CSP = `default-src 'none'; style-src ${STYLE_HASH}; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`;

/**
 * True when the client asks for a page rather than JSON: its Accept header names text/html with
 * a weight above that of application/json (a browser's navigation does; curl's `*\/*`, the
 * CLI's and the typed client's `application/json` do not).
 */
export function wantsHtml(request: FastifyRequest): boolean {
  const accept = request.headers.accept;
  if (!accept) return false;
  let html = 0;
  let json = 0;
  for (const range of accept.split(',')) {
    const [type, ...params] = range.trim().toLowerCase().split(';').map((p) => p.trim());
    const q = params.find((p) => p.startsWith('q='));
    const weight = q ? Number(q.slice(2)) : 1;
    if (Number.isNaN(weight)) continue;
    if (type === 'text/html') html = Math.max(html, weight);
    if (type === 'application/json') json = Math.max(json, weight);
  }
  return html > 0 && html > json;
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Text as HTML text or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

function humanSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)}</title><style>${STYLE}</style></head>
<body>${body}</body></html>
`;
}

/** The room page. `base` is the invite URL (`/api/v1/rooms/<token>`); `notice` a line shown on top. */
export function renderRoomPage(view: RoomView, base: string, notice?: string): string {
  const { room, member, files } = view;
  const rows = files.map((f) => `<tr><td><a href="${escapeHtml(`${base}/files/${f.id}/download`)}" download>${escapeHtml(f.name)}</a></td>`
    + `<td class="size">${humanSize(f.size)}</td><td>${escapeHtml(f.added_at.slice(0, 10))}</td></tr>`).join('\n');
  const list = files.length === 0
    ? '<p class="muted" id="empty">No files in this room yet.</p>'
    : `<table id="files"><thead><tr><th>File</th><th class="size">Size</th><th>Added</th></tr></thead><tbody>\n${rows}\n</tbody></table>`;
  const more = view.next_cursor ? `<p><a href="${escapeHtml(`${base}?cursor=${encodeURIComponent(view.next_cursor)}`)}">More files</a></p>` : '';
  const upload = member.role === 'contributor'
    ? `<form id="upload" method="post" action="${escapeHtml(`${base}/upload`)}" enctype="multipart/form-data">
<label for="file">Add a file to this room</label><br>
<input type="file" id="file" name="file" required> <button type="submit">Upload</button>
<p class="muted">Every upload is scanned for malware before it is kept.</p></form>`
    : '';
  const expiry = room.expires_at ? ` · open until ${escapeHtml(room.expires_at.slice(0, 16).replace('T', ' '))} UTC` : '';
  return page(room.name, `<h1>${escapeHtml(room.name)}</h1>
${room.description ? `<p>${escapeHtml(room.description)}</p>` : ''}
<p class="muted">Signed in by invitation as ${escapeHtml(member.email)} (${member.role})${expiry}</p>
${notice ? `<p class="notice" role="status">${escapeHtml(notice)}</p>` : ''}
${list}${more}${upload}`);
}

/** An error as a page (an invite that is gone, a blocked upload), with a way back when there is one. */
export function renderErrorPage(message: string, back?: string): string {
  return page('Data room', `<h1>Data room</h1><p class="error" role="alert">${escapeHtml(message)}</p>${back ? `<p><a href="${escapeHtml(back)}">Back to the room</a></p>` : ''}`);
}

/** Sends `html` with the page's headers: its policy, no caching, no referrer (the URL is the credential). */
export function sendPage(reply: FastifyReply, status: number, html: string): FastifyReply {
  return reply.code(status).headers({
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': ROOM_PAGE_CSP,
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'cache-control': 'no-store',
    'referrer-policy': 'no-referrer',
  }).send(html);
}
