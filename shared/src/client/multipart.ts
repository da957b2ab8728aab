import { randomBytes } from 'node:crypto';

/** One file to upload: its bytes are read once, as they are sent. */
export interface UploadSource {
  /** The file name stored (one path segment). */
  name: string;
  /** A Readable, or any (async) iterable of bytes. */
  content: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>;
  /** Exact byte count when known: the request then has a Content-Length instead of chunked encoding. */
  size?: number;
  /** Target folder; absent = `/`. */
  path?: string;
  /** Sent as the part's Content-Type (the server sniffs the real type from the bytes). */
  contentType?: string;
}

/** A multipart body made as it is read: a head, the file's bytes as they come, a tail. */
export interface MultipartBody {
  contentType: string;
  contentLength?: number;
  body: AsyncIterable<Uint8Array>;
}

/** `"` and line breaks would end the header early; `%22` is what browsers send for a quote. */
const quoted = (value: string) => value.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');

/**
 * `multipart/form-data` with the parts `path` (when given) and `file`, streamed without
 * buffering the content (docs/api.md "Upload": part names `file` and `path`).
 */
export function multipartUpload(source: UploadSource): MultipartBody {
  const boundary = `----xfer-${randomBytes(16).toString('hex')}`;
  const pathPart = source.path === undefined ? ''
    : `--${boundary}\r\nContent-Disposition: form-data; name="path"\r\n\r\n${source.path}\r\n`;
  const head = Buffer.from(
    `${pathPart}--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${quoted(source.name)}"\r\n` +
    `Content-Type: ${source.contentType ?? 'application/octet-stream'}\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  async function* body(): AsyncGenerator<Uint8Array> {
    yield head;
    for await (const chunk of source.content) yield typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    yield tail;
  }
  return {
    contentType: `multipart/form-data; boundary=${boundary}`,
    contentLength: source.size === undefined ? undefined : head.length + source.size + tail.length,
    body: body(),
  };
}
