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
export class RateLimitedError extends AppError {
  constructor(message: string, retryAfterSeconds: number) {
    super(429, message, { headers: { 'retry-after': String(retryAfterSeconds) } });
  }
}
export class ServiceUnavailableError extends AppError {
  constructor(message: string, cause?: unknown) { super(503, message, { cause }); }
}
