/** Runs one call of a store's SDK, turning any error it throws into the connector's own (`map`). */
export async function mapErrors<T>(fn: () => Promise<T>, map: (err: unknown) => Error): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw map(err);
  }
}
