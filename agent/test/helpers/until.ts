import { eventually } from '../../../control-plane/test/protocol-client.js';

/**
 * Resolves once `ok()` holds (it may be async); fails naming `what` past `timeoutMs`. The agent
 * tests' wait for a state, over the project's one polling helper (`eventually`), never a sleep.
 */
export async function until(what: string, ok: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  await eventually(async () => (await ok()) || undefined, what, timeoutMs);
}
