/**
 * Whether a database error is a unique-index violation (E11000): how an insert that is a claim
 * (a queue entry, a schedule run) learns that another caller, on any instance, claimed first.
 * FerretDB reports the code as MongoDB does; the message test covers drivers that wrap it.
 */
export function isDuplicateKey(err: unknown): boolean {
  return (err as { code?: number } | null)?.code === 11000 || /E11000/.test(String((err as Error | null)?.message));
}
