// The seam between the exchange and telemetry: the exchange reports what happened, the
// telemetry side (metrics, traces) decides what to record. The no-op observer costs nothing.
import type { CatalogModel, CatalogUpstream } from '../catalog/snapshot.js';
import type { RefusalReason, TokenUsage } from '../billing/ledger.js';
import type { RelayOutcome } from '../relay/relay.js';
import type { GatewayContext } from '../request/state.js';
import type { UpstreamFailure } from '../upstream/upstream-request.js';

export type LedgerOperation = 'reserve' | 'settle' | 'lookup';

export interface UpstreamCallObservation {
  /** Adds W3C trace context for the upstream call. */
  injectTraceHeaders(headers: Record<string, string>): void;
  failed(failure: UpstreamFailure): void;
  /** The upstream answered 2xx and relaying begins. */
  relayStarted(stream: boolean): void;
  finished(outcome: RelayOutcome): void;
}

export interface ExchangeObserver {
  timeLedger<T>(op: LedgerOperation, fn: () => Promise<T>): Promise<T>;
  reservation(ctx: GatewayContext, outcome: 'admitted' | RefusalReason): void;
  /** `maxTokens` is the output limit sent upstream; `stream` whether the client asked for a stream. */
  upstreamStarted(ctx: GatewayContext, model: CatalogModel, upstream: CatalogUpstream, host: string, port: number, maxTokens: number, stream: boolean): UpstreamCallObservation;
  settled(ctx: GatewayContext, model: CatalogModel, upstream: CatalogUpstream | undefined, usage: TokenUsage, chargedMicros: number, outcome: RelayOutcome): void;
}
