/**
 * Resolves once `ok()` holds (it may be async), polled every 20 ms; fails naming `what` past `timeoutMs`. The agent
 * tests' one wait for a state (never a fixed sleep: a busy machine stretches every step).
 */
export async function until(what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`${what}: not in ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
