// A client request's plan for the exchange: its format pairs (one per upstream format the model's
// upstreams speak), and every upstream body built from them before the reservation, so the footprint
// the worst case is reserved for is measured on the bytes that will be sent.
import type { CatalogModel } from '../catalog/snapshot.js';
import type { FormatPairs } from '../translate/pair.js';
import type { ClientFormatName } from '../formats/index.js';
import type { ExchangePlan } from './exchange.js';
import { buildUpstreamBodies } from '../reserve/upstream-bodies.js';

export interface PlanInput {
  /** The format its errors are answered in (the Responses API answers in OpenAI's). */
  clientFormat: ClientFormatName;
  /** The request field that limits output, named in a 402's advice (max_tokens unless said). */
  outputLimitField?: string;
  model: CatalogModel;
  stream: boolean;
  /** The client's output limit, if it gave one. */
  maxOutputTokens: number | undefined;
  pairs: FormatPairs;
  estimateInputTokens(): Promise<number>;
}

export function exchangePlan(p: PlanInput): ExchangePlan {
  const bodies = buildUpstreamBodies(p.model, p.maxOutputTokens, (upstream, outputLimit) => p.pairs(upstream.format).request(upstream, outputLimit));
  // Any upstream may serve, each at the one reserved limit: it must suit the most demanding body.
  const minOutputTokens = Math.max(1, ...p.model.upstreams.map((u) => p.pairs(u.format).minOutputLimit ?? 1));
  return {
    clientFormat: p.clientFormat,
    ...(p.outputLimitField === undefined ? {} : { outputLimitField: p.outputLimitField }),
    model: p.model,
    footprint: bodies.footprint,
    minOutputTokens,
    stream: p.stream,
    upstreamBody: bodies.body,
    upstreamHeaders: (upstream) => p.pairs(upstream.format).headers(upstream),
    relay: (upstream) => p.pairs(upstream.format).relay(upstream),
    estimateInputTokens: () => p.estimateInputTokens(),
  };
}
