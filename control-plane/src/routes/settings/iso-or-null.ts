/** ISO string of a stored instant, null for "never" (unset or the epoch default). */
export const isoOrNull = (date: Date | null | undefined): string | null => (date && date.getTime() > 0 ? date.toISOString() : null);
