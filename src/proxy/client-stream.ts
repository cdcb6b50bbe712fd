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

/** An AbortSignal that fires when the client goes away before the response is complete. */
export function clientGoneSignal(res: ServerResponse): AbortController {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller;
}
