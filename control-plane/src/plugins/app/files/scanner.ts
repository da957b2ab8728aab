import fp from 'fastify-plugin';
import type { Readable } from 'node:stream';
import type { ScannerConfig } from '../../../config.js';
import { PayloadTooLargeError, ServiceUnavailableError } from '../../../errors.js';
import { CLAMD_MAX_SCAN_BYTES, ClamdError, clamdPing, clamdVersion, describeAddress, instream, prematureClose, type ScanVerdict } from '../../../lib/clamd.js';
import { instreamWindows } from '../../../lib/clamd-windows.js';
import type { MetricsService } from '../metrics/index.js';

export type { ScanVerdict } from '../../../lib/clamd.js';

export interface Scanner {
  /** 'clamd', or 'none' (XFER_SCANNER=none: everything is clean; development only). */
  readonly kind: 'clamd' | 'none';
  /**
   * Streams `source` to clamd over INSTREAM while it is being read (chunks as they arrive, with
   * backpressure; never the whole file in memory) and resolves with the verdict once clamd has
   * seen the end of the stream. Rejects with ServiceUnavailableError (503,
   * "Malware scanner unavailable: <reason>") when clamd cannot be reached, answers an error, or
   * does not answer within config.scanner.timeoutMs; with PayloadTooLargeError (413) when clamd
   * refuses the size (INSTREAM size limit exceeded, or a file larger than its MaxFileSize or
   * MaxScanSize reported by AlertExceedsMax). A stream longer than clamd scans whole
   * (CLAMD_MAX_SCAN_BYTES) is scanned in overlapping windows of that size, unless
   * config.scanner.oversize is 'reject' (then clamd's refusal is the 413). Aborting `signal` destroys the clamd socket and
   * rejects with the signal's reason. An error of `source` itself rejects with that error. On any
   * rejection `source` is paused and left to the caller (not destroyed). A failure never
   * resolves as clean (fail closed). `source` must not have been read from before (that rejects:
   * its first bytes would go unscanned); it is paused until clamd accepted the connection.
   *
   * With kind 'none' the stream is still read to its end (so a tee feeding it never stalls)
   * and then resolves clean.
   */
  scan(source: Readable, signal?: AbortSignal): Promise<ScanVerdict>;
  /** PING → PONG; false when clamd does not answer. Always true for 'none'. */
  ping(): Promise<boolean>;
}

declare module 'fastify' {
  interface FastifyInstance {
    scanner: Scanner;
  }
}

/**
 * Bytes each window of a file larger than clamd scans whole repeats from the window before: body
 * signatures are far shorter, so one that straddles a boundary is still whole in some window.
 */
export const WINDOW_OVERLAP_BYTES = 1024 * 1024;

/** PING is answered at once by a live clamd: waiting longer only delays a start or a health check. */
const PING_TIMEOUT_MS = 5000;

/** Maps a clamd failure to the API's errors: 413 for a size refusal, 503 for everything else. */
function toAppError(err: unknown): unknown {
  if (!(err instanceof ClamdError)) return err;
  if (err.reason === 'size-limit') return new PayloadTooLargeError(`File is too large for the malware scanner: ${err.message}`);
  return new ServiceUnavailableError(`Malware scanner unavailable: ${err.message}`, err);
}

/** Reads `source` to its end without keeping anything. */
function drain(source: Readable, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (source.readableEnded) return resolve();
    const done = (err?: unknown) => {
      source.off('end', onEnd).off('error', done).off('close', onClose);
      signal?.removeEventListener('abort', onAbort);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onEnd = () => done();
    const onClose = () => done(prematureClose());
    const onAbort = () => {
      source.pause();
      done(signal!.reason);
    };
    if (signal?.aborted) return reject(signal.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    source.once('end', onEnd).once('error', done).once('close', onClose);
    source.resume();
  });
}

/** `scanner` reporting each scan's outcome and latency to the metrics (wrapped by files.plugin.ts around the upload's scanner; the scanner plugin itself needs no metrics). */
export function measured(scanner: Scanner, metrics: Pick<MetricsService, 'scanned'>): Scanner {
  return {
    kind: scanner.kind,
    ping: () => scanner.ping(),
    async scan(source, signal) {
      const started = performance.now();
      const seconds = () => (performance.now() - started) / 1000;
      try {
        const verdict = await scanner.scan(source, signal);
        metrics.scanned(verdict.clean ? 'clean' : 'infected', seconds());
        return verdict;
      } catch (err) {
        metrics.scanned('error', seconds());
        throw err;
      }
    },
  };
}

/** The scanner for `config` (the plugin below decorates the app with it). */
export function createScanner(config: ScannerConfig): Scanner {
  if (config.kind === 'none') {
    return {
      kind: 'none',
      async scan(source, signal) {
        await drain(source, signal);
        return { clean: true };
      },
      ping: async () => true,
    };
  }
  const { address, timeoutMs, oversize } = config;
  return {
    kind: 'clamd',
    async scan(source, signal) {
      try {
        if (oversize === 'reject') return await instream(address, source, { timeoutMs, signal });
        return await instreamWindows(address, source, { timeoutMs, signal, windowBytes: CLAMD_MAX_SCAN_BYTES, overlapBytes: WINDOW_OVERLAP_BYTES });
      } catch (err) {
        throw toAppError(err);
      }
    },
    ping: () => clamdPing(address, Math.min(timeoutMs, PING_TIMEOUT_MS)),
  };
}

/**
 * Decorates `app.scanner` (docs/configuration.md "Malware scanning"). A clamd that does not
 * answer at start does not fail the start: it is logged, and uploads answer 503 until it answers.
 */
export default fp(
  async (app) => {
    const config = app.config.scanner;
    const scanner = createScanner(config);
    app.decorate<Scanner>('scanner', scanner);
    if (config.kind === 'none') {
      app.log.warn('XFER_SCANNER=none: uploads are NOT scanned for malware. This is unsafe outside development.');
      return;
    }
    const where = describeAddress(config.address);
    if (await scanner.ping()) {
      // The signature database's version and date, so an outdated one shows in the log.
      const version = await clamdVersion(config.address, Math.min(config.timeoutMs, PING_TIMEOUT_MS));
      app.log.info({ clamd: where, version }, `malware scanner: clamd at ${where} answers PING (${version ?? 'version unknown'})`);
    } else {
      app.log.warn({ clamd: where }, `malware scanner: clamd at ${where} does not answer PING; uploads answer 503 until it does`);
    }
  },
  { name: 'scanner' },
);
