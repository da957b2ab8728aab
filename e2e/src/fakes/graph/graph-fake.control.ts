import { request } from 'node:https';

/** Where a running Graph fake listens, and the CA its certificate is signed by. */
export interface GraphFakeAt {
  host: string;
  port: number;
  ca: string | Buffer;
}

/**
 * One call to the fake's test controls (`/_fake/<what>`: faults, statistics, the request log), the
 * JSON answer parsed; a status of 300 or more rejects naming the control. Test code only.
 */
export function graphFakeControl<T = unknown>(at: GraphFakeAt, method: string, what: string, body?: unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    const req = request({ host: at.host, port: at.port, ca: at.ca, method, path: `/_fake/${what}`, headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        if ((res.statusCode ?? 0) >= 300) return reject(new Error(`fake ${what}: ${res.statusCode}`));
        const text = Buffer.concat(chunks).toString('utf8');
        resolve((text ? JSON.parse(text) : undefined) as T);
      });
    });
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}
