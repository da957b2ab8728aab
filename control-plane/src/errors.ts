/**
 * Errors thrown by services and routes. The one error handler (plugins/app/error-handler.ts)
 * turns them into `{error}` with their status; anything else becomes a 500 with no detail.
 */
export class AppError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    options?: { cause?: unknown; headers?: Record<string, string> },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.headers = options?.headers ?? {};
  }
  readonly headers: Record<string, string>;
}

export class BadRequestError extends AppError {
  constructor(message: string) { super(400, message); }
}
export class UnauthorizedError extends AppError {
  constructor(message: string) { super(401, message); }
}
export class ForbiddenError extends AppError {
  constructor(message: string) { super(403, message); }
}
export class NotFoundError extends AppError {
  constructor(message: string) { super(404, message); }
}
export class ConflictError extends AppError {
  constructor(message: string) { super(409, message); }
}
export class GoneError extends AppError {
  constructor(message: string) { super(410, message); }
}
export class PayloadTooLargeError extends AppError {
  constructor(message: string) { super(413, message); }
}
export class UnsupportedMediaTypeError extends AppError {
  constructor(message: string) { super(415, message); }
}
export class UnprocessableEntityError extends AppError {
  constructor(message: string) { super(422, message); }
}
export class RangeNotSatisfiableError extends AppError {
  /** `size`: the whole representation's length, sent as `Content-Range: bytes *\/size` (RFC 9110 §15.5.17). */
  constructor(message: string, size: number) { super(416, message, { headers: { 'content-range': `bytes */${size}` } }); }
}
export class RateLimitedError extends AppError {
  constructor(message: string, retryAfterSeconds: number) {
    super(429, message, { headers: { 'retry-after': String(retryAfterSeconds) } });
  }
}
export class ServiceUnavailableError extends AppError {
  constructor(message: string, cause?: unknown) { super(503, message, { cause }); }
}
