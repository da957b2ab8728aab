/**
 * Resolves once `ok()` holds (it may be async), polled every 20 ms; fails naming `what` past `timeoutMs`. The agent
 * tests' one wait for a state (never a fixed sleep: a busy machine stretches every step). Its own
 * loop, as control-plane/test's `eventually`: the agent may not import the control plane's code
 * (.dependency-cruiser.cjs, agent-cli-not-on-control-plane).
 */
export async function until(what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`${what}: not in ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
