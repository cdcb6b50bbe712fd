// OpenAI client, OpenAI-format upstream: the body goes through as it came (model renamed), and the
// reply is relayed with a tap that reads usage. Chunks are forwarded as received, with only the id
// and model rewritten in place; the usage chunk the gateway asked for is dropped again when the
// client did not ask for it, and gains the charge (`usage.cost`) when it did.
import type { EventSourceMessage } from 'eventsource-parser';
import type { TokenUsage } from '../billing/ledger.js';
import { isRecord, type JsonObject } from '../wire/json-shape.js';
import { billableUsage } from './billable-usage.js';
import { collectOpenAIChoice, usageFromOpenAI } from '../formats/openai-chat/index.js';
import { relayableUpstreamMessage } from '../wire/upstream-message.js';
import { ClientEventStream, SHUTDOWN_CUT_MESSAGE } from './client-stream.js';
import { emptyOutcome, unredacted, type Relay } from './relay.js';
import { pumpUpstreamEvents } from './upstream-events.js';
import { insertUsageCost } from './usage-cost-text.js';

export interface OpenAIRelayOptions {
  /** The id the client sees: contains the request id. */
  completionId: string;
  /** The model id the client asked for (the upstream's own name is never shown). */
  clientModel: string;
  includeUsage: boolean;
}

export function openaiJsonRelay(opts: OpenAIRelayOptions): Relay {
  return async ({ ctx, response }) => {
    const text = await response.body.text();
    const out = emptyOutcome('completed');
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (!isRecord(json)) {
      out.status = 'upstream_failed';
      throw Object.assign(new Error('upstream sent a body that is not a JSON object'), { relayOutcome: out });
    }
    out.usage = billableUsage(usageFromOpenAI(json.usage));
    if (isRecord(json.usage)) out.answerUsage = json.usage;
    if (Array.isArray(json.choices)) for (const c of json.choices) collectOpenAIChoice(c, out);
    if (typeof json.model === 'string') out.responseModel = json.model;
    json.id = opts.completionId;
    json.model = opts.clientModel;
    ctx.status = 200;
    ctx.type = 'application/json';
    ctx.body = json;
    return out;
  };
}

/** A replacement of one exact field text (`"id":"x"`) in each chunk, falling back to a re-encode. */
function fieldText(name: string, value: unknown): string {
  return `"${name}":${JSON.stringify(value)}`;
}

const IN_BAND_CUT = 'The upstream stream ended before the reply was complete; the output above is partial.';

export function inBandOpenAIError(message: string, type = 'server_error', code: string | null = null): string {
  return `data: ${JSON.stringify({ error: { message, type, param: null, code } })}\n\n`;
}

export function openaiStreamRelay(opts: OpenAIRelayOptions): Relay {
  return async ({ ctx, response, cancellation, redact = unredacted, costUsd }) => {
    const out = emptyOutcome('completed');
    const client = new ClientEventStream(ctx.res, cancellation.writeTimeoutMs, cancellation.keepAliveMs);
    ctx.respond = false;
    client.start();
    let sawDone = false;
    let failed: string | undefined;
    let idFrom: string | undefined;
    let modelFrom: string | undefined;
    const idTo = fieldText('id', opts.completionId);
    const modelTo = fieldText('model', opts.clientModel);
    const pending: string[] = [];

    const onEvent = (event: EventSourceMessage): void => {
      const data = event.data;
      if (data === '[DONE]') {
        sawDone = true;
        return;
      }
      let chunk: unknown;
      try {
        chunk = JSON.parse(data);
      } catch {
        return; // A malformed chunk from the upstream is dropped: forwarding it would crash the client's parser.
      }
      if (!isRecord(chunk)) return;
      if (chunk.error !== undefined) {
        const e = isRecord(chunk.error) ? chunk.error : {};
        failed = typeof e.message === 'string' ? redact(relayableUpstreamMessage(e.message)) : 'upstream error';
        return;
      }
      const reported = chunk.usage !== null && chunk.usage !== undefined;
      const usage: TokenUsage | undefined = reported ? billableUsage(usageFromOpenAI(chunk.usage)) : undefined;
      if (usage !== undefined) out.usage = usage;
      const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
      let produced = false;
      for (const c of choices) produced = collectOpenAIChoice(c, out) || produced;
      if (produced && out.firstTokenAt === undefined) out.firstTokenAt = performance.now();
      if (reported && !opts.includeUsage) {
        if (choices.length === 0) return;
        delete (chunk as JsonObject).usage;
        chunk.id = opts.completionId;
        chunk.model = opts.clientModel;
        pending.push(`data: ${JSON.stringify(chunk)}\n\n`);
        return;
      }
      if (idFrom === undefined) {
        idFrom = fieldText('id', chunk.id);
        modelFrom = fieldText('model', chunk.model);
        if (typeof chunk.model === 'string') out.responseModel = chunk.model;
      }
      let text = data;
      if (text.includes(idFrom) && modelFrom !== undefined && text.includes(modelFrom)) {
        text = text.replace(idFrom, idTo).replace(modelFrom, modelTo);
      } else {
        chunk.id = opts.completionId;
        chunk.model = opts.clientModel;
        text = JSON.stringify(chunk);
      }
      // The usage chunk the client asked for carries the charge (its only change besides id and model).
      if (usage !== undefined && costUsd !== undefined) {
        Object.assign(chunk, { id: opts.completionId, model: opts.clientModel });
        text = insertUsageCost(text, chunk, costUsd(usage));
      }
      pending.push(`data: ${text}\n\n`);
    };

    const cut = await pumpUpstreamEvents(response.body, client, {
      onEvent,
      drain: () => {
        if (pending.length === 0) return '';
        const text = pending.length === 1 ? (pending[0] as string) : pending.join('');
        pending.length = 0;
        return text;
      },
      done: () => failed !== undefined,
    });
    if (cancellation.clientGone || !client.open) {
      out.status = 'client_cancelled';
      return out;
    }
    if (cut && cancellation.cutByShutdown === true) {
      // Typed as the translated streams type it (openai-stream-encoder's 'overloaded'): retryable.
      out.status = 'upstream_failed';
      client.end(inBandOpenAIError(SHUTDOWN_CUT_MESSAGE, 'service_unavailable_error', 'server_is_overloaded'));
      return out;
    }
    if (cut) failed = IN_BAND_CUT;
    if (failed === undefined && !sawDone && out.finishReason === undefined) failed = IN_BAND_CUT;
    if (failed !== undefined) {
      out.status = 'upstream_failed';
      client.end(inBandOpenAIError(failed));
      return out;
    }
    client.end('data: [DONE]\n\n');
    return out;
  };
}
