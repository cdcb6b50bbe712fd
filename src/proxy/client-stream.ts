// Writes server-sent events to the client as they come: no buffering, flushed per event,
// with backpressure (a slow client slows the upstream read instead of growing memory).
import type { ServerResponse } from 'node:http';
import { once } from 'node:events';

export class ClientEventStream {
  private started = false;

  constructor(private readonly res: ServerResponse) {}

  get open(): boolean {
    return !this.res.destroyed && !this.res.writableEnded;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
  }

  async write(text: string): Promise<void> {
    if (text === '' || !this.open) return;
    this.start();
    if (!this.res.write(text)) {
      await Promise.race([once(this.res, 'drain'), once(this.res, 'close')]);
    }
  }

  end(text = ''): void {
    if (!this.open) return;
    this.start();
    this.res.end(text);
  }
}

/**
 * Why an exchange stops early: the client went away before its response was complete, or the request
 * deadline passed. One controller and one cleared timer per request: AbortSignal.timeout plus
 * AbortSignal.any cost several times more (each combined signal is tracked by weak references until
 * collected, and the timeout timer outlives the request), and showed in the profile.
 */
export class ExchangeCancellation {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private gone = false;
  private expired = false;

  constructor(
    private readonly res: ServerResponse,
    timeoutMs: number,
  ) {
    res.once('close', this.onClose);
    this.timer = setTimeout(this.onDeadline, timeoutMs);
    this.timer.unref();
  }

  /** Aborts the upstream call, for either reason. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The client disconnected before the response was complete. */
  get clientGone(): boolean {
    return this.gone;
  }

  /** The request deadline passed. */
  get timedOut(): boolean {
    return this.expired;
  }

  /** Stops watching: call once the exchange is over. */
  dispose(): void {
    clearTimeout(this.timer);
    this.res.off('close', this.onClose);
  }

  private readonly onClose = (): void => {
    if (this.res.writableFinished) return;
    this.gone = true;
    this.controller.abort();
  };

  private readonly onDeadline = (): void => {
    this.expired = true;
    this.controller.abort();
  };
}
