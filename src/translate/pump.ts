// The translated reply's side of a cross-format pair, whatever the client: an upstream's whole reply
// read with the usage to bill, and a translated stream pumped from the upstream to the client with
// the bookkeeping billing needs. The chat pairs (via-internal.ts) and the Responses API's pair
// (src/responses/pair.ts) both use it.
import { upstreamFormat } from '../formats/index.js';
import type { CatalogUpstream } from '../catalog/snapshot.js';
import { billablePrompt, billableUsage } from '../relay/billable-usage.js';
import { ClientEventStream, SHUTDOWN_CUT_MESSAGE } from '../relay/client-stream.js';
import { emptyOutcome, unredacted, type Relay, type RelayOutcome } from '../relay/relay.js';
import { pumpUpstreamEvents } from '../relay/upstream-events.js';
import { isRecord, type NormalizedUsage } from '../representation/index.js';
import type { StreamTranslator } from '../representation/stream-translator.js';

/** An upstream's non-stream reply, parsed, with the model it reports. */
export async function upstreamReply(response: Parameters<Relay>[0]['response']): Promise<{ out: RelayOutcome; json: unknown }> {
  const out = emptyOutcome('completed');
  const json: unknown = JSON.parse(await response.body.text());
  if (isRecord(json) && typeof json.model === 'string') out.responseModel = json.model;
  return { out, json };
}

/** The usage to bill, or, without a billable report, what the upstream generated (the exchange estimates from it). */
export function billFrom(out: RelayOutcome, usage: NormalizedUsage, json: unknown, upstream: CatalogUpstream): void {
  out.usage = billableUsage(usage);
  if (out.usage !== undefined || !isRecord(json)) return;
  upstreamFormat(upstream.format).collectGenerated(json, out);
}

/**
 * The charge of a stream's final usage as its last event reports it (USD), or undefined when the usage
 * cannot be billed by (the exchange estimates then, after the stream) or no cost was asked for.
 */
export function streamCost({ costUsd }: Parameters<Relay>[0]): ((usage: NormalizedUsage) => number | undefined) | undefined {
  if (costUsd === undefined) return undefined;
  return (usage) => {
    const billable = billableUsage(usage);
    return billable === undefined ? undefined : costUsd(billable);
  };
}

/** A translated stream from the upstream to the client, with the bookkeeping billing needs. */
export async function pumpTranslated(
  translator: StreamTranslator,
  opening: string,
  { ctx, response, cancellation, redact = unredacted }: Parameters<Relay>[0],
  /** Runs after the final events are built and before they are written (a response is stored first). */
  beforeEnd: () => Promise<void> = async () => undefined,
): Promise<RelayOutcome> {
    const out = emptyOutcome('completed');
    const client = new ClientEventStream(ctx.res, cancellation.writeTimeoutMs, cancellation.keepAliveMs);
    ctx.respond = false;
    client.start();
    let pending = opening;
    const cut = await pumpUpstreamEvents(response.body, client, {
      onEvent: (event) => {
        const text = translator.push({ ...(event.event === undefined ? {} : { event: event.event }), data: event.data });
        // Only an error event carries upstream text the gateway did not generate itself.
        pending += event.event === 'error' || event.data.includes('"error"') ? redact(text) : text;
      },
      drain: () => {
        const text = pending;
        pending = '';
        return text;
      },
      done: () => translator.state !== 'open',
      beforeWrite: () => {
        if (out.firstTokenAt === undefined && translator.emittedOutput) out.firstTokenAt = performance.now();
      },
    });
    out.generated = translator.generatedPieces();
    out.reasoningGenerated = translator.reasoningPieces();
    out.finishReason = translator.finishReason;
    const prompt = translator.reportedPromptUsage;
    if (prompt !== undefined) out.reportedPrompt = billablePrompt(prompt);
    if (translator.responseModel !== undefined) out.responseModel = translator.responseModel;
    if (cancellation.clientGone || !client.open) {
      out.status = 'client_cancelled';
      return out;
    }
    const truncated = translator.state === 'open' && translator.finishReason === undefined;
    if (translator.state === 'failed' || cut || truncated) {
      out.status = 'upstream_failed';
      const cutEvent = (): string =>
        cut && cancellation.cutByShutdown === true
          ? translator.fail(SHUTDOWN_CUT_MESSAGE, 'overloaded')
          : translator.fail('The upstream stream ended before the reply was complete; the output above is partial.', 'api_error');
      client.end(pending + (translator.state === 'failed' ? '' : cutEvent()));
      return out;
    }
    const ending = translator.finish();
    await beforeEnd();
    client.end(pending + ending);
    // Only a complete stream's usage is final; a cut one is billed from what was generated.
    if (translator.usageReported) out.usage = billableUsage(translator.usage);
    return out;
}
