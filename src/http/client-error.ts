// What the apps (admin API, dashboard, top-ups) refuse a caller with: an HTTP status and a message
// written for that caller. One class, so each app's error middleware answers all of them alike and no
// glue re-throws one app's error as another's.
export class ClientError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Seconds the caller should wait before trying again (sets Retry-After). */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'ClientError';
  }
}
