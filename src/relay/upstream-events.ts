// The read loop every streaming relay shares: an upstream SSE body decoded and parsed event by event,
// and whatever the relay's event handler queued written to the client once per network read (the
// events of one read go out in one write, with backpressure from the client).
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import type { ClientEventStream } from './client-stream.js';

export interface UpstreamEventPump {
  /** Called for each upstream event; it queues client text for `drain` to hand over. */
  onEvent(event: EventSourceMessage): void;
  /** Takes the queued client text ('' when none) and empties the queue. */
  drain(): string;
  /** Checked after each read: true ends the loop (the upstream failed or finished in-band). */
  done(): boolean;
  /** Called just before queued text is written (e.g. to time the first token). */
  beforeWrite?(): void;
}

/**
 * Pumps `body` through `pump` to `client`. Returns true when the body broke off (a transport error: an
 * upstream cut, or the request aborted), false when it ended or `done()` stopped the loop. Text queued
 * by the last read before a stop stays queued for the caller.
 */
export async function pumpUpstreamEvents(body: AsyncIterable<unknown>, client: ClientEventStream, pump: UpstreamEventPump): Promise<boolean> {
  const parser = createParser({ onEvent: (event) => pump.onEvent(event) });
  const decoder = new TextDecoder();
  try {
    for await (const piece of body) {
      parser.feed(decoder.decode(piece as Buffer, { stream: true }));
      const text = pump.drain();
      if (text !== '') {
        pump.beforeWrite?.();
        await client.write(text);
      }
      if (pump.done()) break;
    }
  } catch {
    return true;
  }
  return false;
}
