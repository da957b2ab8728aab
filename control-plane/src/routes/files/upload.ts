import type { FastifyInstance, FastifyRequest } from 'fastify';
import { BadRequestError } from '../../errors.js';
import { MULTIPART_FIELD_MAX_BYTES, multipartProblem } from '../../plugins/external/multipart.js';
import {
  fileNameProblem, normalizeFolder, type BlockedUpload, type ReceivedUpload, type ScannedContent, type UploadLimit,
} from '../../plugins/app/files/files.service.js';

/** The client went away before the body was complete. */
export class ClientGoneError extends BadRequestError {
  constructor() { super('Upload ended before the multipart body was complete'); }
}

/**
 * Reads a multipart upload (`path` and `file`, in either order: the content is committed only
 * after the whole body has been read, so a `path` after the file still decides the record). The
 * file part streams to the scanner and the store through `app.files.receive`. Every failure
 * discards what was stored; the client going away (`signal`) too. With `options.folder` the
 * upload goes there and a `path` part is refused; with `options.limit` the file may be at most that
 * large (a data room's remaining quota).
 */
export async function receiveUpload(
  app: FastifyInstance, request: FastifyRequest, signal: AbortSignal, options: { folder?: string; limit?: UploadLimit } = {},
): Promise<ReceivedUpload | BlockedUpload> {
  // A fixed folder (a data room's) takes no `path` part.
  const allowed = options.folder === undefined ? 'file, path' : 'file';
  let folder: string | undefined = options.folder;
  let fileName: string | undefined;
  let file: ScannedContent | undefined;
  try {
    for await (const part of request.parts()) {
      if (part.type === 'field') {
        if (part.fieldname === 'file') throw new BadRequestError('Upload part "file" must be a file (a part with a filename)');
        if (part.fieldname !== 'path' || options.folder !== undefined) throw new BadRequestError(`Upload has unknown part "${part.fieldname}" (allowed: ${allowed})`);
        if (part.valueTruncated) throw new BadRequestError(`Upload field "path" must be at most ${MULTIPART_FIELD_MAX_BYTES} bytes`);
        folder = normalizeFolder('Upload field "path"', String(part.value));
        continue;
      }
      // A refused file part is not read on: destroying it stops the parser, and the answer
      // closes the connection instead of taking in the rest of a large upload.
      if (part.fieldname !== 'file') {
        part.file.destroy();
        throw new BadRequestError(`Upload has unknown file part "${part.fieldname}"; the file part must be named "file"`);
      }
      const problem = fileNameProblem(part.filename);
      if (problem) {
        part.file.destroy();
        throw new BadRequestError(`Upload file name ${problem}`);
      }
      fileName = part.filename;
      file = await app.files.receive(part.file, part.filename, signal, options.limit);
    }
  } catch (err) {
    if (file && !file.verdict.clean) return app.files.blocked(file, fileName!, folder);
    await app.files.discard(file);
    if (signal.aborted) throw signal.reason;
    throw multipartProblem(err);
  }
  if (!file || fileName === undefined) throw new BadRequestError('Upload has no "file" part');
  if (!file.verdict.clean) return app.files.blocked(file, fileName, folder);
  return { folder: folder ?? '/', name: fileName, size: file.size, sha256: file.sha256, mimeType: file.mimeType, pending: file.pending! };
}
