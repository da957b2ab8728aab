/**
 * The `mtime` user metadata of objects (S3, R2, GCS, Azure Blob), written and read exactly as
 * rclone does, so that each reads the modification times the other kept (docs/connectors.md
 * "Modification times"). One key, `mtime`, in a format that depends on rclone's backend:
 *  - s3 / r2 (rclone backend/s3): seconds since the epoch with nine decimals, `1614834367.891000000`;
 *  - gcs (rclone backend/googlecloudstorage): RFC 3339 with fraction, `2021-03-04T05:06:07.891Z`,
 *    besides gsutil's `goog-reserved-file-mtime` (whole seconds) which rclone writes too;
 *  - Azure Blob (rclone backend/azureblob): RFC 3339 with nine decimals, `2021-03-04T05:06:07.891000000Z`.
 * Reading accepts any of them (and gsutil's key alone), whoever wrote it. JavaScript dates hold
 * milliseconds: a time rclone kept in nanoseconds reads back truncated to the millisecond.
 */
export const MTIME_KEY = 'mtime';
/** gsutil's key (whole seconds), which rclone's GCS backend writes and reads after `mtime`. */
export const GSUTIL_MTIME_KEY = 'goog-reserved-file-mtime';

export type MtimeFormat = 'seconds' | 'rfc3339' | 'rfc3339-nano9';

/** The `mtime` value of `time` in `format`. */
export function formatMtime(time: Date, format: MtimeFormat): string {
  const ms = time.getTime();
  if (format === 'seconds') {
    const seconds = Math.floor(ms / 1000);
    return `${seconds}.${String(ms - seconds * 1000).padStart(3, '0')}000000`;
  }
  const iso = time.toISOString();
  return format === 'rfc3339' ? iso : `${iso.slice(0, -1)}000000Z`;
}

/** The metadata entries that keep `time` in objects of a store whose rclone backend uses `format`. */
export function mtimeMetadata(time: Date, format: MtimeFormat): Record<string, string> {
  const meta: Record<string, string> = { [MTIME_KEY]: formatMtime(time, format) };
  if (format === 'rfc3339') meta[GSUTIL_MTIME_KEY] = String(Math.floor(time.getTime() / 1000));
  return meta;
}

/**
 * The time an object's metadata keeps, or undefined when it keeps none readable (then the
 * store's own write time stands). Keys are matched without regard to case (HTTP headers).
 */
export function keptMtime(metadata: Record<string, string | undefined> | undefined): Date | undefined {
  if (!metadata) return undefined;
  let mtime: string | undefined;
  let gsutil: string | undefined;
  for (const [key, value] of Object.entries(metadata)) {
    const k = key.toLowerCase();
    if (k === MTIME_KEY) mtime = value;
    else if (k === GSUTIL_MTIME_KEY) gsutil = value;
  }
  return (mtime !== undefined ? parseMtime(mtime) : undefined) ?? (gsutil !== undefined && /^-?\d{1,15}$/.test(gsutil.trim()) ? new Date(Number(gsutil.trim()) * 1000) : undefined);
}

/** Seconds with an optional fraction, or an RFC 3339 date-time; undefined for anything else. */
export function parseMtime(value: string): Date | undefined {
  const text = value.trim();
  const seconds = /^(-?)(\d{1,15})(?:\.(\d{1,9}))?$/.exec(text);
  if (seconds) {
    // Integer arithmetic: a float of 19 significant digits would lose the milliseconds.
    const ms = Number(seconds[2]) * 1000 + Number((seconds[3] ?? '').padEnd(3, '0').slice(0, 3));
    return new Date(seconds[1] === '-' ? -ms : ms);
  }
  const rfc = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/i.exec(text);
  if (!rfc) return undefined;
  const date = new Date(`${rfc[1]}T${rfc[2]}.${(rfc[3] ?? '').padEnd(3, '0').slice(0, 3)}${rfc[4]!.toUpperCase()}`);
  return Number.isNaN(date.getTime()) ? undefined : date;
}
