import { Type, type Static } from '@sinclair/typebox';
import { ConnectionSettings } from '../schemas/connections.js';
import { StringEnum } from '../schemas/common.js';
import { ProtocolError } from './protocol-error.js';
import { COMPARE_MODES, FilterOptions, RUN_MODES } from './job-options.js';

/**
 * Relays (issue 14, docs/architecture.md "Relays"): a job whose source and destination no one
 * agent serves runs on two. The **destination agent** runs the job as usual (`job.assign` with
 * `relay` set and no source settings: it plans, writes, verifies, commits and reports); the
 * **source agent** is told by the control plane to serve the job's source (`relay.source`): it
 * lists and reads, and sends what the destination asks for. Every relay frame goes through the
 * control plane (the agents never talk to each other), which checks that each session plays its
 * part in that job's current attempt and that the source never sends more than the destination
 * granted, and forwards it unchanged to the other side (across instances when the two agents'
 * sockets are on different ones).
 *
 * The conversation, per job attempt (every text message carries `job_id` and `attempt`):
 *
 *   control plane → source   `relay.source`   the source settings and path: start serving
 *   destination → source     `relay.credit`   may send this many more listing entries and content bytes
 *   source → destination     `relay.entries`  the source's listing, in pages, within entry credit; `done` on the last
 *   destination → source     `relay.want`     send the content of these files, in this order
 *   source → destination     binary frames    the wanted files as one tar stream (below), within byte credit
 *   source → control plane   `relay.sent`     the files it packed: path, size and the SHA-256 of the bytes it read
 *   either side (or the control plane) → the other   `relay.end`   over: finished, failed or cancelled
 *
 * Credits are increments: the destination grants more as it consumes. It starts with at most
 * `RELAY_WINDOW_BYTES` bytes and `MAX_RELAY_ENTRIES` entries outstanding, which bounds what every
 * hop holds of one relay (the control plane's buffers included). Byte credit counts the payload
 * bytes of binary frames (the tar stream as it is, headers and padding included, frame headers
 * not); entry credit counts the entries of `relay.entries`. Granted minus received never exceeds
 * those two bounds. A source that exceeds its credit, or a destination that grants past the
 * bounds, is a protocol breach: the control plane ends the relay (`relay.end` with an error to
 * both sides). An agent ignores a `relay.end` for a relay it does not play (the control plane
 * answers any relay frame about a relay the sending session does not play with one).
 *
 * Each side sends `relay.end` once, when it stops (whatever the reason; not when its session is
 * gone): the source, for instance, answers the destination's `relay.end` with its own once it has
 * stopped reading and closed its connector. Messages and frames of a relay that has ended (those
 * crossing a `relay.end`) are dropped by whoever gets them, never a protocol error.
 *
 * **The tar stream** (tar-stream's pack/extract, pax headers): for each wanted file, in `want`
 * order, a regular entry named by the file's path with the size the want gave and pax record
 * `xfer.kind=file`, then a zero-size regular entry with the same name and pax records
 * `xfer.kind=sum` and either `xfer.sha256=<hex SHA-256 of the bytes read>` or `xfer.error=<why>`
 * (a read that failed or found another size: the content entry was cut or zero-padded to its
 * declared size and must be discarded). A file that cannot be opened at all gets the `sum` entry
 * alone. The destination checks the SHA-256 of what it received against `xfer.sha256` before it
 * commits the file (end-to-end from the source's read to the destination's commit).
 *
 * **What the source vouches for** (`relay.sent`): each file whose content it read whole and
 * packed, with its size and the SHA-256 it computed while reading (the one in its `sum` entry),
 * in batches of at most `MAX_RELAY_SENT_FILES`, sent before it waits for more wants (and before
 * its `relay.end`). The control plane records them for the job's attempt and never forwards them
 * to the destination (an instance holding the source for another one passes them over the peer
 * link unchanged): a source file is moved or deleted only when the destination's verified result
 * matches this record (docs/security.md "Relays": each side vouches only for itself). A source
 * vouching for more files than the destination wanted breaks the protocol.
 *
 * **Binary frames** carry the tar bytes: `RELAY_FRAME_HEADER_BYTES` of header (`encodeRelayChunk`)
 * naming job and attempt, then at most `RELAY_CHUNK_BYTES` of payload. Only sessions whose hello
 * and welcome both set `relay` send them; for any other session a binary frame stays a protocol
 * error.
 */

/** Largest payload of one binary relay frame. */
export const RELAY_CHUNK_BYTES = 256 * 1024;
/** Most content bytes a destination grants outstanding at once (each hop holds at most this much of one relay). */
export const RELAY_WINDOW_BYTES = 8 * 1024 * 1024;
/** Most listing entries in one `relay.entries`, paths in one `relay.want`, and entries granted outstanding. */
export const MAX_RELAY_ENTRIES = 1000;
/** Most files in one `relay.sent`. */
export const MAX_RELAY_SENT_FILES = 100;
/** Bytes of the binary frame header: magic `0x78` ('x'), kind `0x01` (tar bytes), 12-byte job id, uint32 BE attempt. */
export const RELAY_FRAME_HEADER_BYTES = 18;
const MAGIC = 0x78;
const KIND_TAR = 0x01;

const RelayRef = {
  job_id: Type.String({ pattern: '^[0-9a-f]{24}$' }),
  attempt: Type.Integer({ minimum: 1 }),
};

/** One listed item of the source, relative to the job's source path as in `FileResult` (a single-file source: its name). */
export const RelayEntry = Type.Object({
  path: Type.String({ minLength: 1, maxLength: 4096 }),
  kind: StringEnum(['file', 'directory'] as const),
  size: Type.Integer({ minimum: 0 }),
  /** ISO 8601, when the store knows it. */
  modified_at: Type.Optional(Type.String({ maxLength: 40 })),
  /** The store's own checksum, when it has one (the overwrite policy `if_changed` compares it). */
  checksum: Type.Optional(Type.Object({
    // `quickxor`: OneDrive's QuickXorHash (issue 25: compared between two OneDrive connections).
    algorithm: StringEnum(['sha256', 'md5', 'crc32c', 'etag', 'quickxor'] as const),
    value: Type.String({ maxLength: 128 }),
  })),
});
export type RelayEntry = Static<typeof RelayEntry>;

/** The relay messages the control plane forwards between the two agents (same schema in both directions). */
export const RelayForwarded = {
  'relay.credit': Type.Object({
    ...RelayRef,
    entries: Type.Integer({ minimum: 0, maximum: MAX_RELAY_ENTRIES }),
    bytes: Type.Integer({ minimum: 0, maximum: RELAY_WINDOW_BYTES }),
  }),
  'relay.entries': Type.Object({
    ...RelayRef,
    entries: Type.Array(RelayEntry, { maxItems: MAX_RELAY_ENTRIES }),
    /** The listing ended with this page. */
    done: Type.Boolean(),
  }),
  'relay.want': Type.Object({
    ...RelayRef,
    files: Type.Array(Type.Object({
      path: Type.String({ minLength: 1, maxLength: 4096 }),
      /** The size the listing gave: the tar entry's declared size. */
      size: Type.Integer({ minimum: 0 }),
    }), { minItems: 1, maxItems: MAX_RELAY_ENTRIES }),
  }),
  /**
   * The relay is over for the sender: without `error`, finished (the destination committed
   * everything it wanted; the source sent everything wanted and its listing ended); with it,
   * failed or cancelled. Also sent by the control plane to a side whose peer is gone.
   */
  'relay.end': Type.Object({
    ...RelayRef,
    error: Type.Optional(Type.String({ maxLength: 4000 })),
    /**
     * With `error`, from the source: the failure is the job's own and would recur on any agent
     * (its source path does not exist, the store refused the credentials, the listing failed), so
     * the destination fails the run with it, as a direct run does. Absent: the relay was
     * interrupted (an agent busy or shutting down, a side or the path between them gone) and the
     * destination's run ends `job.failed` with `interrupted`, for another run to take over.
     */
    permanent: Type.Optional(Type.Boolean()),
  }),
} as const;

/** Relay messages only the source agent sends, to the control plane (never forwarded to the destination agent). */
export const RelayAgentToServer = {
  /** Files the source read whole and packed into the relay's tar stream: what it vouches for (see above). */
  'relay.sent': Type.Object({
    ...RelayRef,
    files: Type.Array(Type.Object({
      path: Type.String({ minLength: 1, maxLength: 4096 }),
      size: Type.Integer({ minimum: 0 }),
      /** Hex SHA-256 of the bytes the source read (its `sum` entry's `xfer.sha256`). */
      sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    }), { minItems: 1, maxItems: MAX_RELAY_SENT_FILES }),
  }),
} as const;

/** Relay messages only the control plane sends. */
export const RelayServerToAgent = {
  /**
   * Serve the source of this job attempt for its destination agent: list `source_path` on
   * `source`, send entries and wanted content within the credit the destination grants, read at
   * most `concurrency` files ahead. Answered by nothing but the relay traffic (or `relay.end`
   * with an error, such as an agent already running `max_jobs`).
   */
  'relay.source': Type.Object({
    ...RelayRef,
    source: ConnectionSettings,
    source_path: Type.String({ minLength: 1, maxLength: 4096 }),
    concurrency: Type.Integer({ minimum: 1, maximum: 64 }),
    /**
     * Issue 25: how to list for a job that compares listings (`sync`, `move`, filters or
     * `compare`; docs/agent.md "Sync, move and plans"): in full-path byte order, filtered with the
     * job's filters (an excluded directory is never listed). Absent: the lazy listing of a plain copy.
     * `compare` (absent: `size_mtime`): with it, an entry whose listing lacks the kept time (an S3
     * object the source agent's index does not know) is stat'ed by the source agent, the only one
     * that can, before it is sent.
     */
    listing: Type.Optional(Type.Object({
      mode: Type.Optional(StringEnum(RUN_MODES)),
      filters: Type.Optional(FilterOptions),
      compare: Type.Optional(StringEnum(COMPARE_MODES)),
    }, { additionalProperties: false })),
  }),
} as const;

/** A decoded binary relay frame. `payload` is a view into the frame, not a copy. */
export interface RelayChunk {
  jobId: string;
  attempt: number;
  payload: Buffer;
}

/** The header of a binary relay frame for job `jobId` (24 hex characters), attempt `attempt`. */
export function relayFrameHeader(jobId: string, attempt: number): Buffer {
  if (!/^[0-9a-f]{24}$/.test(jobId)) throw new RangeError('relay job id must be 24 lower-case hex characters');
  const header = Buffer.allocUnsafe(RELAY_FRAME_HEADER_BYTES);
  header[0] = MAGIC;
  header[1] = KIND_TAR;
  header.write(jobId, 2, 12, 'hex');
  header.writeUInt32BE(attempt, 14);
  return header;
}

/** A binary relay frame: header + payload (at most RELAY_CHUNK_BYTES; one copy, as a WebSocket frame needs one buffer anyway). */
export function encodeRelayChunk(jobId: string, attempt: number, payload: Uint8Array): Buffer {
  if (payload.length > RELAY_CHUNK_BYTES) throw new RangeError(`relay chunk larger than ${RELAY_CHUNK_BYTES} bytes`);
  return Buffer.concat([relayFrameHeader(jobId, attempt), payload]);
}

/** Decodes a binary frame; ProtocolError when it is not a relay frame of this protocol. */
export function decodeRelayChunk(frame: Buffer): RelayChunk {
  if (frame.length < RELAY_FRAME_HEADER_BYTES || frame[0] !== MAGIC || frame[1] !== KIND_TAR) {
    throw new ProtocolError('binary frame is not a relay frame');
  }
  if (frame.length - RELAY_FRAME_HEADER_BYTES > RELAY_CHUNK_BYTES) throw new ProtocolError(`relay frame payload larger than ${RELAY_CHUNK_BYTES} bytes`);
  const attempt = frame.readUInt32BE(14);
  if (attempt < 1) throw new ProtocolError('relay frame attempt must be at least 1');
  return { jobId: frame.toString('hex', 2, 14), attempt, payload: frame.subarray(RELAY_FRAME_HEADER_BYTES) };
}
