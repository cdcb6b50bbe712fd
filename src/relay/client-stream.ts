// Writes server-sent events to the client as they come: no buffering, flushed per event,
// with backpressure (a slow client slows the upstream read instead of growing memory).
import type { ServerResponse } from 'node:http';
import { EventEmitter, once } from 'node:events';

/** How long a write may wait for a client that stopped reading before the response is cut. */
export const DEFAULT_CLIENT_WRITE_TIMEOUT_MS = 30_000;
/**
 * A stream silent this long (an upstream thinking before its first token) gets an SSE comment, so
 * proxies and clients with idle timeouts keep the connection; every client format ignores comments.
 */
export const DEFAULT_STREAM_KEEPALIVE_MS = 15_000;
const KEEPALIVE = ': keepalive\n\n';

export class ClientEventStream {
  private started = false;
  private lastWrite = 0;
  private keepAlive: NodeJS.Timeout | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly writeTimeoutMs: number = DEFAULT_CLIENT_WRITE_TIMEOUT_MS,
    private readonly keepAliveMs: number = DEFAULT_STREAM_KEEPALIVE_MS,
  ) {}

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
    this.lastWrite = Date.now();
    if (this.keepAliveMs > 0) {
      const tick = Math.max(10, Math.floor(this.keepAliveMs / 2));
      this.keepAlive = setInterval(() => {
        if (!this.open) return this.stopKeepAlive();
        // Only into an idle, drained socket: a comment never lands inside an event, nor on backpressure.
        if (Date.now() - this.lastWrite >= this.keepAliveMs && this.res.writableNeedDrain !== true) {
          this.res.write(KEEPALIVE);
          this.lastWrite = Date.now();
        }
      }, tick);
      this.keepAlive.unref();
      this.res.once('close', () => this.stopKeepAlive());
    }
  }

  private stopKeepAlive(): void {
    if (this.keepAlive !== undefined) clearInterval(this.keepAlive);
    this.keepAlive = undefined;
  }

  async write(text: string): Promise<void> {
    if (text === '' || !this.open) return;
    this.start();
    this.lastWrite = Date.now();
    if (!this.res.write(text)) {
      // A client that stops reading must not keep the exchange (and its upstream call and hold) alive:
      // past the write deadline the response is cut, which ends the exchange as a client cancellation,
      // settled for what was generated.
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          this.res.destroy();
          resolve();
        }, this.writeTimeoutMs);
      });
      // The losing waits are cancelled, so a long stream that often waits does not pile up listeners.
      const done = new AbortController();
      const ended = (p: Promise<unknown>) => p.catch(() => undefined);
      try {
        await Promise.race([ended(once(this.res, 'drain', { signal: done.signal })), ended(once(this.res, 'close', { signal: done.signal })), deadline]);
      } finally {
        clearTimeout(timer);
        done.abort();
      }
    }
  }

  end(text = ''): void {
    this.stopKeepAlive();
    if (!this.open) return;
    this.start();
    this.res.end(text);
  }
}

/** The text of the error event that ends a stream cut by a shutdown that outlasted its drain bound. */
export const SHUTDOWN_CUT_MESSAGE = 'The gateway is restarting and could not finish this reply in time; the output above is partial (it and the prompt were charged). Retry the request.';

/**
 * A gateway's shutdown as the exchanges see it: `draining` once it stops taking new work (readiness
 * false), then 'cut' when the drain bound has passed and the exchanges still open must end now.
 */
export class ShutdownSignal extends EventEmitter {
  draining = false;
  cut = false;

  constructor() {
    super();
    // One listener per open exchange.
    this.setMaxListeners(0);
  }

  startDrain(): void {
    this.draining = true;
  }

  cutOpenExchanges(): void {
    if (this.cut) return;
    this.cut = true;
    this.emit('cut');
  }
}

/**
 * Why an exchange stops early: the client went away before its response was complete, the request
 * deadline passed, or a shutdown's drain bound did. It is itself the abort signal handed to undici, which accepts an EventEmitter with
 * `aborted` and an 'abort' event: an AbortController (an EventTarget) per request, or worse
 * AbortSignal.timeout plus AbortSignal.any, cost several times more and showed in the CPU profile.
 * One cleared timer per request.
 */
export class ExchangeCancellation extends EventEmitter {
  /** Read by undici before it sends and when it attaches its listener. */
  aborted = false;
  private readonly timer: NodeJS.Timeout;
  private gone = false;
  private expired = false;
  private stopped = false;

  constructor(
    private readonly res: ServerResponse,
    timeoutMs: number,
    /** Longest a write may wait for the client to read (ClientEventStream's deadline). */
    readonly writeTimeoutMs: number = DEFAULT_CLIENT_WRITE_TIMEOUT_MS,
    private readonly shutdown?: ShutdownSignal,
    /** Silence after which a stream gets a keep-alive comment (ClientEventStream). */
    readonly keepAliveMs: number = DEFAULT_STREAM_KEEPALIVE_MS,
  ) {
    super();
    res.once('close', this.onClose);
    this.timer = setTimeout(this.onDeadline, timeoutMs);
    this.timer.unref();
    if (shutdown?.cut === true) this.onShutdownCut();
    else shutdown?.once('cut', this.onShutdownCut);
  }

  /** The gateway's drain bound passed: the exchange is ended in the client's format and settled. */
  get cutByShutdown(): boolean {
    return this.stopped;
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
    this.shutdown?.off('cut', this.onShutdownCut);
  }

  private abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.emit('abort');
  }

  private readonly onClose = (): void => {
    if (this.res.writableFinished) return;
    this.gone = true;
    this.abort();
  };

  private readonly onShutdownCut = (): void => {
    this.stopped = true;
    this.abort();
  };

  private readonly onDeadline = (): void => {
    this.expired = true;
    this.abort();
  };
}
