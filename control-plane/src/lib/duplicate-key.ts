/**
 * Whether a database error is a unique-index violation (E11000): how an insert that is a claim
 * (a queue entry, a schedule run) learns that another caller, on any instance, claimed first.
 * FerretDB reports the code as MongoDB does; the message test covers drivers that wrap it.
 */
export function isDuplicateKey(err: unknown): boolean {
  return (err as { code?: number } | null)?.code === 11000 || /E11000/.test(String((err as Error | null)?.message));
}

/**
 * Whether an unordered `insertMany` failed only on unique-index violations: the records that were
 * there already (a report sent twice) are skipped, every other one was inserted.
 */
export function onlyDuplicateKeys(err: unknown): boolean {
  const writeErrors = (err as { writeErrors?: Array<{ code?: number; err?: { code?: number } }> } | null)?.writeErrors;
  const duplicatesOnly = Array.isArray(writeErrors) && writeErrors.every((e) => (e.code ?? e.err?.code) === 11000);
  return duplicatesOnly || (err as { code?: number } | null)?.code === 11000;
}
