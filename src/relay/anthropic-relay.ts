// Anthropic client, Anthropic-format upstream: events are relayed one by one with their data
// untouched (thinking blocks and signatures stay byte-for-byte), except that message_start
// names the model the client asked for and message_delta's usage gains the charge (`cost`). A tap
// reads the cumulative usage on the way. Thinking blocks the request did not ask for are dropped
// (whole replies and streams, the later blocks renumbered), as Anthropic's own API would not send them.
import type { EventSourceMessage } from 'eventsource-parser';
import { isRecord } from '../wire/json-shape.js';
import { billablePrompt, billableUsage } from './billable-usage.js';
import {
  collectAnthropicContent,
  mergeAnthropicUsage,
  ThinkingBlockFilter,
  usageFromAnthropicCounters,
  withoutThinking,
  type AnthropicUsageCounters,
} from '../formats/anthropic-messages/index.js';
import { relayableUpstreamMessage } from '../wire/upstream-message.js';
import { ClientEventStream, SHUTDOWN_CUT_MESSAGE } from './client-stream.js';
import { emptyOutcome, unredacted, type Relay } from './relay.js';
import { pumpUpstreamEvents } from './upstream-events.js';
import { insertUsageCost } from './usage-cost-text.js';

export interface AnthropicRelayOptions {
  clientModel: string;
  /** The request enabled thinking: thinking blocks reach the client (else they are billed, not sent). */
  showThinking: boolean;
}

export function anthropicJsonRelay(opts: AnthropicRelayOptions): Relay {
  return async ({ ctx, response }) => {
    const out = emptyOutcome('completed');
    const json: unknown = JSON.parse(await response.body.text());
    if (!isRecord(json)) throw Object.assign(new Error('upstream body is not an object'), { relayOutcome: { ...out, status: 'upstream_failed' } });
    const counters: AnthropicUsageCounters = {};
    mergeAnthropicUsage(counters, json.usage);
    out.usage = billableUsage(usageFromAnthropicCounters(counters));
    if (isRecord(json.usage)) out.answerUsage = json.usage;
    out.finishReason = typeof json.stop_reason === 'string' ? json.stop_reason : undefined;
    collectAnthropicContent(json, out);
    if (!opts.showThinking) json.content = withoutThinking(json.content);
    if (typeof json.model === 'string') out.responseModel = json.model;
    json.model = opts.clientModel;
    ctx.status = 200;
    ctx.type = 'application/json';
    ctx.body = json;
    return out;
  };
}

export const anthropicErrorEvent = (type: string, message: string): string =>
  `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type, message } })}\n\n`;

export function anthropicStreamRelay(opts: AnthropicRelayOptions): Relay {
  return async ({ ctx, response, cancellation, redact = unredacted, costUsd }) => {
    const out = emptyOutcome('completed');
    const counters: AnthropicUsageCounters = {};
    const thinking = opts.showThinking ? undefined : new ThinkingBlockFilter();
    const client = new ClientEventStream(ctx.res, cancellation.writeTimeoutMs, cancellation.keepAliveMs);
    ctx.respond = false;
    client.start();
    let pending = '';
    let stopped = false;
    let failed = false;
    let sawUsageEnd = false;

    const onEvent = (event: EventSourceMessage): void => {
      const name = event.event ?? 'message';
      let data = event.data;
      if (thinking !== undefined && (name === 'content_block_start' || name === 'content_block_stop')) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(data);
        } catch {
          return;
        }
        if (!isRecord(parsed)) return;
        const fate = thinking.apply(name, parsed);
        if (fate === 'drop') return;
        if (fate === 'renumbered') data = JSON.stringify(parsed);
      } else if (name === 'message_start' || name === 'message_delta' || name === 'content_block_delta' || name === 'error') {
        let parsed: unknown;
        try {
          parsed = JSON.parse(data);
        } catch {
          return; // a malformed event would break the client's parser: drop it
        }
        if (!isRecord(parsed)) return;
        if (name === 'message_start' && isRecord(parsed.message)) {
          mergeAnthropicUsage(counters, parsed.message.usage);
          out.reportedPrompt = billablePrompt(usageFromAnthropicCounters(counters)) ?? out.reportedPrompt;
          if (typeof parsed.message.model === 'string') out.responseModel = parsed.message.model;
          parsed.message.model = opts.clientModel;
          data = JSON.stringify(parsed);
        } else if (name === 'message_delta') {
          mergeAnthropicUsage(counters, parsed.usage);
          out.reportedPrompt = billablePrompt(usageFromAnthropicCounters(counters)) ?? out.reportedPrompt;
          sawUsageEnd = true;
          if (isRecord(parsed.delta) && typeof parsed.delta.stop_reason === 'string') out.finishReason = parsed.delta.stop_reason;
          // The final usage event carries the charge of the usage so far (its only change).
          const billable = billableUsage(usageFromAnthropicCounters(counters));
          if (billable !== undefined && costUsd !== undefined) data = insertUsageCost(data, parsed, costUsd(billable));
        } else if (name === 'content_block_delta' && isRecord(parsed.delta)) {
          const d = parsed.delta;
          const piece = typeof d.text === 'string' ? d.text : typeof d.thinking === 'string' ? d.thinking : typeof d.partial_json === 'string' ? d.partial_json : undefined;
          // A hidden thinking block's deltas are counted (billed if usage is missing), not sent.
          const fate = thinking?.apply(name, parsed) ?? 'keep';
          if (piece !== undefined && piece !== '') {
            out.generated.push(piece);
            if (typeof d.thinking === 'string') out.reasoningGenerated.push(piece);
            if (fate !== 'drop' && out.firstTokenAt === undefined) out.firstTokenAt = performance.now();
          }
          if (fate === 'drop') return;
          if (fate === 'renumbered') data = JSON.stringify(parsed);
        } else if (name === 'error') {
          failed = true;
          // Rebuilt, not relayed: the upstream's text may echo a credential.
          const e = isRecord(parsed.error) ? parsed.error : {};
          const type = typeof e.type === 'string' && /^[a-z_]{1,64}$/.test(e.type) ? e.type : 'api_error';
          data = JSON.stringify({ type: 'error', error: { type, message: typeof e.message === 'string' ? redact(relayableUpstreamMessage(e.message)) : 'Upstream error' } });
        }
      } else {
        // Small events (block start/stop, ping, message_stop) are checked too: a malformed one
        // would break the client's parser just the same.
        try {
          JSON.parse(data);
        } catch {
          return;
        }
        if (name === 'message_stop') stopped = true;
      }
      pending += `event: ${name}\ndata: ${data}\n\n`;
    };

    const cut = await pumpUpstreamEvents(response.body, client, {
      onEvent,
      drain: () => {
        const text = pending;
        pending = '';
        return text;
      },
      done: () => failed,
    });
    if (sawUsageEnd) out.usage = billableUsage(usageFromAnthropicCounters(counters));
    if (cancellation.clientGone || !client.open) {
      out.status = 'client_cancelled';
      return out;
    }
    if (failed || cut || !stopped) {
      out.status = 'upstream_failed';
      const cutEvent =
        cut && cancellation.cutByShutdown === true
          ? anthropicErrorEvent('overloaded_error', SHUTDOWN_CUT_MESSAGE)
          : anthropicErrorEvent('api_error', 'The upstream stream ended before the reply was complete; the output above is partial.');
      client.end(pending + (failed ? '' : cutEvent));
      return out;
    }
    client.end(pending);
    return out;
  };
}
