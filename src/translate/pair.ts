// The translate step: one translator per (client format, upstream format) pair, all behind this
// interface. The exchange asks the pair of the upstream it is about to call for the request, the
// headers and the relay; it never looks at either format itself. Same-format pairs send the client's
// bytes with the model and output limit replaced in place (body-edit.ts); cross-format pairs go
// through the internal representation (src/representation).
import type { CatalogModel, CatalogUpstream } from '../catalog/snapshot.js';
import type { Relay } from '../relay/relay.js';
import type { UpstreamFormatName } from '../formats/index.js';
import type { JsonObject } from '../representation/index.js';

/** One upstream request body: the bytes sent, and the request as a value (where images are counted). */
export interface UpstreamBody {
  /** The client's bytes edited (same-format pairs) or the translation serialised (cross-format). */
  sent: string | Buffer;
  /** The request as a value; for same-format pairs, the client's parsed body (the same messages). */
  json: JsonObject;
}

export function serialised(json: JsonObject): UpstreamBody {
  return { sent: JSON.stringify(json), json };
}

export interface FormatPair {
  /** The upstream request, with exactly `outputLimit` as its output limit (measured for the reservation before it is sent). */
  request(upstream: CatalogUpstream, outputLimit: number): UpstreamBody;
  /** The protocol headers this upstream gets (anthropic-version, anthropic-beta, ...). */
  headers(upstream: CatalogUpstream): Record<string, string>;
  /** How the upstream's reply reaches the client, with the usage billing needs. */
  relay(upstream: CatalogUpstream): Relay;
  /** The smallest output limit its request can take (a client's thinking budget needs more than it); 1 when not said. */
  minOutputLimit?: number;
}

/** What every pair of one client request shares. */
export interface PairRequest {
  model: CatalogModel;
  requestId: string;
  /** Our count of the prompt, for when an upstream reports no usage (and Anthropic's message_start). */
  estimateInputTokens(): Promise<number>;
}

/** The pair for each upstream format a model's upstreams may speak. */
export type FormatPairs = (upstream: UpstreamFormatName) => FormatPair;

/**
 * Builds each pair once, when an upstream of its format is first asked for: the same-format pair the
 * client format has, else the cross-format one.
 */
export function pairsOf(same: Partial<Record<UpstreamFormatName, () => FormatPair>>, cross: (upstream: UpstreamFormatName) => FormatPair): FormatPairs {
  const built = new Map<UpstreamFormatName, FormatPair>();
  return (upstream) => {
    let pair = built.get(upstream);
    if (pair === undefined) {
      pair = same[upstream]?.() ?? cross(upstream);
      built.set(upstream, pair);
    }
    return pair;
  };
}
