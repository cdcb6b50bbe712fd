// The composition root: builds a running gateway (HTTP server, metrics server, reaper) from its
// parts. The local run, the production entry point and the tests all start gateways through it.
import { createHash, randomBytes } from 'node:crypto';
import { MemoryResponsesStore, type ResponsesStore } from './responses/store.js';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Backend } from './billing/backends.js';
import type { Ledger } from './billing/ledger.js';
import { LedgerHealth } from './billing/ledger-health.js';
import { startReaper } from './billing/reaper.js';
import { SettlementQueue } from './settle/settlement-queue.js';
import type { CatalogSource, SecretResolver } from './catalog/snapshot.js';
import type { GatewayConfig } from './config.js';
import { chainHead } from './audit/chain.js';
import type { Queryable } from './record/database.js';
import { createGatewayApp } from './http/app.js';
import { KeyAuthenticator } from './authenticate/authenticate.js';
import type { GatewayContext } from './request/state.js';
import { ShutdownSignal } from './relay/client-stream.js';
import { telemetryObserver } from './exchange/telemetry-observer.js';
import { GatewayMetrics, type MetricsServer } from './telemetry/metrics.js';
import { createLogger, type TollgateLogger } from './telemetry/logger.js';
import { DISABLED_TRACING, type Tracing } from './telemetry/tracing.js';
import { UpstreamDispatchers } from './upstream/dispatchers.js';
import { UpstreamRouter } from './upstream/router.js';
import type { JournalWriter } from './record/journal-writer.js';
import { JournaledLedger } from './record/journaled-ledger.js';

/** Status recorded for a request whose client disconnected before the response was complete. */
export const CLIENT_CLOSED_REQUEST = 499;

/** After the drain bound cut the open exchanges, how long they get to end and settle. */
const CUT_GRACE_MS = 5_000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function errorText(err: unknown): string {
  return (err instanceof Error ? `${err.name}: ${err.message}` : String(err)).slice(0, 500);
}

export interface GatewayParts {
  config: GatewayConfig;
  catalog: CatalogSource;
  backend: Backend;
  secrets: SecretResolver;
  metrics?: GatewayMetrics;
  tracing?: Tracing;
  logger?: TollgateLogger;
  /** Start the /metrics server on config.metricsPort (default true). */
  serveMetrics?: boolean;
  /**
   * The journal to PostgreSQL: every settlement is handed to it, requests are refused while it is past
   * its lag bound, and close() flushes it. Without one the hot path is the only record (tests, bench).
   */
  journal?: JournalWriter;
  /** Where Responses API objects are kept (the record); in this process's memory when absent. */
  responsesStore?: ResponsesStore;
  /** The record (PostgreSQL): GET /v1/generation and the key's daily and weekly spend read it; the hot path's recent records when absent. */
  record?: Queryable;
  /**
   * Whether the ledger is usable now (the Redis backend's, from backendFromConfig): requests are refused
   * with a fast 503 and /readyz is false while it is down. Default: a ledger that never fails (memory).
   */
  ledgerHealth?: LedgerHealth;
}

export interface RunningGateway {
  url: string;
  port: number;
  server: Server;
  metrics: GatewayMetrics;
  metricsServer: MetricsServer | undefined;
  authenticator: KeyAuthenticator;
  logger: TollgateLogger;
  /**
   * Requests still being handled. A non-streaming answer and a stream both reach the client before
   * their settlement, so this is how a caller knows every answered request is also settled.
   */
  inFlight(): number;
  close(): Promise<void>;
}

/** The reasoning envelope's key: TOLLGATE_REASONING_KEY, else one per process (envelopes then do not outlive it). */
function reasoningKey(configured: string): Buffer {
  return configured === '' ? randomBytes(32) : createHash('sha256').update(configured).digest();
}

/** What is recorded of each finished request: its metric, its span's end and its log line. */
function requestFinished(metrics: GatewayMetrics, logger: TollgateLogger): (ctx: GatewayContext) => void {
  return (ctx) => {
    const s = ctx.state;
    // A client that hung up mid-response is recorded as 499 (nginx's "client closed request"),
    // whatever status the response had begun with.
    const status = s.clientClosed === true ? CLIENT_CLOSED_REQUEST : ctx.status;
    const latencyMs = performance.now() - s.startedAt;
    metrics.requestFinished(s.route, s.format, s.modelId, status, latencyMs);
    if (s.span) {
      s.span.setRoute(s.route);
      s.span.setRequest({ ...(s.modelId === undefined ? {} : { model: s.modelId }) });
      s.span.end(status, s.outcome?.errorCode ? { type: s.outcome.errorCode } : undefined);
    }
    // Not even built when the level drops it; absent fields are undefined, which the line leaves out.
    if (!logger.logsRequest(status)) return;
    const outcome = s.outcome;
    logger.logRequest({
      requestId: s.requestId,
      keyId: s.key?.id,
      accountId: s.key?.accountId,
      model: s.modelId,
      route: s.route,
      status,
      inputTokens: outcome?.inputTokens ?? 0,
      outputTokens: outcome?.outputTokens ?? 0,
      cost: outcome?.costMicros ?? 0,
      latencyMs: Math.round(latencyMs * 1000) / 1000,
      errorCode: outcome?.errorCode || undefined,
      traceId: s.span?.traceId || undefined,
    });
  };
}

/** The journal's commits and failures into metrics and logs, and its lag sampled each second. */
function reportJournal(journal: JournalWriter, metrics: GatewayMetrics, logger: TollgateLogger): NodeJS.Timeout {
  journal.report({
    onCommitted: (records, _charged, merged) => metrics.journalCommit(records, merged),
    onError: (err, stage) => {
      metrics.journalFailed(stage);
      logger.log.warn({ event: 'journal_failed', stage, error: errorText(err) }, 'journal step failed; the entries are kept and retried');
    },
  });
  const sampler = setInterval(() => {
    const lag = journal.lag();
    metrics.setJournalLag(lag.count, lag.oldestMs);
  }, 1_000);
  sampler.unref();
  return sampler;
}

/** Expired holds released on a timer, reported to metrics and logs. */
function startReaperFor(ledger: Ledger, intervalMs: number, metrics: GatewayMetrics, logger: TollgateLogger): ReturnType<typeof startReaper> {
  return startReaper(ledger, {
    intervalMs,
    onReaped: (n, released) => metrics.holdsExpired(n, released),
    onHolds: (holds) => metrics.setHolds(holds.count, holds.held),
    onError: (err) => {
      metrics.reaperFailed();
      // The message only: a client error object can carry the command and its arguments.
      logger.log.warn({ event: 'reaper_failed', error: errorText(err) }, 'reaper pass failed; expired holds are retried at the next pass');
    },
  });
}

interface CountedListener {
  server: Server;
  port: number;
  /** Requests whose middleware has not finished. */
  inFlight: () => number;
  /** Closes the connections that have sent nothing for SILENT_CONNECTION_MS (see drain()). */
  closeSilentConnections: () => void;
}

/** A connection that has sent no byte for this long, once the drain has begun, is closed. */
const SILENT_CONNECTION_MS = 1_000;

/** The gateway's HTTP listener, counting the requests in flight for the drain. */
async function listenCounted(callback: (req: IncomingMessage, res: ServerResponse) => Promise<void>, shutdown: ShutdownSignal, port: number, host: string): Promise<CountedListener> {
  // Requests whose middleware has not finished: a stream's response ends before its settlement does,
  // and the drain waits for the settlement too.
  let inFlight = 0;
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    // While draining, a request on a kept-alive connection is still served, but its connection closes after.
    if (shutdown.draining) res.shouldKeepAlive = false;
    inFlight += 1;
    void callback(req, res).finally(() => {
      inFlight -= 1;
    });
  };
  const server = createServer(handle);
  // When each connection came, for the drain: Node counts a connection that has sent nothing as one
  // receiving a request, so closeIdleConnections() leaves it (a client's spare connection held the
  // drain to its bound).
  const connectedAt = new Map<Socket, number>();
  server.on('connection', (socket: Socket) => {
    connectedAt.set(socket, performance.now());
    socket.once('close', () => connectedAt.delete(socket));
  });
  const closeSilentConnections = (): void => {
    const now = performance.now();
    for (const [socket, at] of connectedAt) if (socket.bytesRead === 0 && now - at >= SILENT_CONNECTION_MS) socket.destroy();
  };
  // With a listener here Node does not answer `Expect: 100-continue` by itself: the key check does,
  // so an unknown key is refused before it is invited to send a body.
  server.on('checkContinue', handle);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port, inFlight: () => inFlight, closeSilentConnections };
}

/**
 * The drain: readiness false at once, no new connections, open requests run to completion up to the
 * drain bound, then the rest are ended in their client's format and settled for what was generated.
 */
async function drain({ server, inFlight, closeSilentConnections }: CountedListener, shutdown: ShutdownSignal, drainTimeoutMs: number, logger: TollgateLogger): Promise<void> {
  shutdown.startDrain();
  logger.log.info({ event: 'drain_started', inFlight: inFlight(), drainTimeoutMs }, 'draining: not ready, no new connections');
  let listenerClosed = false;
  const closed = new Promise<void>((resolve) =>
    server.close(() => {
      listenerClosed = true;
      resolve();
    }),
  );
  const drained = (): boolean => listenerClosed && inFlight() === 0;
  const waitDrained = async (ms: number): Promise<boolean> => {
    const until = Date.now() + ms;
    while (!drained() && Date.now() < until) {
      // Kept-alive connections whose last response has ended would hold the listener open, and so would
      // connections that never sent a request.
      server.closeIdleConnections();
      closeSilentConnections();
      await sleep(Math.min(50, Math.max(1, until - Date.now())));
    }
    return drained();
  };
  if (!(await waitDrained(drainTimeoutMs))) {
    logger.log.warn({ event: 'drain_timeout', inFlight: inFlight() }, 'drain bound passed: open requests are ended and settled for what was generated');
    shutdown.cutOpenExchanges();
    if (!(await waitDrained(CUT_GRACE_MS))) server.closeAllConnections();
  }
  await closed;
  // Cut connections end their exchanges at once; their settlements still get a bounded wait.
  for (const until = Date.now() + CUT_GRACE_MS; inFlight() > 0 && Date.now() < until; ) await sleep(20);
}

/** The ledger's ups and downs into the metric and the log; settlements kept for retry are retried once it is up. */
function watchLedgerHealth(health: LedgerHealth, metrics: GatewayMetrics, logger: TollgateLogger, retrySettlements: () => void): () => void {
  return health.onChange((state, reason) => {
    metrics.setLedgerUp(state === 'up');
    if (state === 'up') retrySettlements();
    if (state === 'down') logger.log.error({ event: 'ledger_down', reason }, 'billing ledger unavailable: new requests get 503 until it is back');
    else logger.log.warn({ event: 'ledger_up', reason }, 'billing ledger available again');
  });
}

/** The exchange's time bounds, from the configuration. */
function exchangeTimes(config: GatewayConfig): Pick<GatewayConfig, 'requestTimeoutMs' | 'holdMarginMs' | 'clientWriteTimeoutMs' | 'streamKeepAliveMs' | 'rateLimitWindowMs'> {
  return {
    requestTimeoutMs: config.requestTimeoutMs,
    holdMarginMs: config.holdMarginMs,
    clientWriteTimeoutMs: config.clientWriteTimeoutMs,
    streamKeepAliveMs: config.streamKeepAliveMs,
    rateLimitWindowMs: config.rateLimitWindowMs,
  };
}

/** The Responses API's store (the record's, else bounded memory) and the key that seals reasoning. */
function responsesOptions(store: ResponsesStore | undefined, config: GatewayConfig, logger: TollgateLogger) {
  return {
    store: store ?? new MemoryResponsesStore({ maxBytes: config.storedResponsesMaxBytes, maxCount: config.storedResponsesMaxCount }),
    envelopeKey: reasoningKey(config.reasoningKey),
    onStoreError: (err: unknown) => logger.log.error({ event: 'response_store_failed', error: String(err) }, 'a Responses API object could not be stored'),
  };
}

export async function startGateway(parts: GatewayParts): Promise<RunningGateway> {
  const { config, catalog } = parts;
  const journal = parts.journal;
  const backend = journal === undefined ? parts.backend : { ...parts.backend, ledger: new JournaledLedger(parts.backend.ledger, journal) };
  const metrics = parts.metrics ?? new GatewayMetrics();
  const tracing = parts.tracing ?? DISABLED_TRACING;
  const logger = parts.logger ?? createLogger();
  metrics.onCatalog(catalog.current());
  const record = parts.record;
  if (record !== undefined) metrics.watchAuditLog(async () => (await chainHead(record)).seq);
  const unsubscribe = catalog.onSwap((snapshot) => metrics.onCatalog(snapshot));
  const observer = telemetryObserver(metrics, tracing);
  const health = parts.ledgerHealth ?? new LedgerHealth();
  const unwatchHealth = watchLedgerHealth(health, metrics, logger, () => settlements.retryNow());
  // Settlements that fail are kept and retried, never dropped (settlement-queue.ts).
  const settlements = new SettlementQueue({
    ledger: { settle: (req) => observer.timeLedger('settle', () => health.run(() => backend.ledger.settle(req))) },
    onPending: (n) => metrics.setSettlementsPending(n),
    onAbandoned: () => metrics.settlementAbandoned(),
    log: (event, fields) => logger.log.warn({ event, ...fields }, event),
  });
  const authenticator = new KeyAuthenticator(backend.accounts, config.keyCacheTtlMs, (read) => observer.timeLedger('lookup', () => health.run(read)));
  const dispatchers = new UpstreamDispatchers(config.upstreamMaxConnections);
  const shutdown = new ShutdownSignal();
  const exchange = {
    shutdown,
    ledger: backend.ledger,
    health,
    settlements,
    router: new UpstreamRouter(),
    dispatchers,
    secrets: parts.secrets,
    observer,
    ...exchangeTimes(config),
    log: (event: string, fields: Record<string, unknown>) => logger.log.warn({ event, ...fields }, event),
    ...(journal === undefined ? {} : { journal }),
  };
  const journalSampler = journal === undefined ? undefined : reportJournal(journal, metrics, logger);
  const app = createGatewayApp({
    catalog,
    authenticator,
    exchange,
    keyMarker: config.keyMarker,
    keyRefusalsPerMinute: config.keyRefusalsPerMinute,
    trustProxy: config.trustProxy,
    maxBodyBytes: config.maxBodyBytes,
    bodyReadTimeoutMs: config.bodyReadTimeoutMs,
    responses: responsesOptions(parts.responsesStore, config, logger),
    accountInfo: { ledger: backend.ledger, health, accounts: backend.accounts, rateLimitWindowMs: config.rateLimitWindowMs, ...(parts.record === undefined ? {} : { record: parts.record }) },
    reportUnexpected: (err, ctx) => logger.log.error({ err, requestId: ctx.state.requestId }, 'unexpected error'),
    requestFinished: requestFinished(metrics, logger),
    ready: () => !shutdown.draining && catalog.current().models.length > 0 && health.up,
    tracing,
  });
  const callback = app.callback();
  const listener = await listenCounted(callback, shutdown, config.port, config.host);
  const { server, port, inFlight } = listener;
  const metricsServer = parts.serveMetrics === false ? undefined : await metrics.startServer(config.metricsPort, config.host);
  const reaper = startReaperFor(backend.ledger, config.reaperIntervalMs, metrics, logger);
  let closing: Promise<void> | undefined;
  return {
    url: `http://${config.host}:${port}`,
    port,
    server,
    metrics,
    metricsServer,
    authenticator,
    logger,
    inFlight,
    close() {
      // Once: SIGTERM and SIGINT, or a test's own close after a drain, share one shutdown.
      closing ??= shutDown();
      return closing;
    },
  };

  async function shutDown(): Promise<void> {
    // The drain first (drain()); only then the settlement retries, the journal and (by the caller) Redis close.
    await drain(listener, shutdown, config.drainTimeoutMs, logger);
    reaper.stop();
    if (journalSampler !== undefined) clearInterval(journalSampler);
    unsubscribe();
    // Settlements that failed get their last retries before anything they need is closed.
    await settlements.flush(config.settlementFlushMs);
    settlements.close();
    unwatchHealth();
    // Every settlement of the requests just finished goes to PostgreSQL before the process ends (what
    // cannot be committed in time stays in the Redis streams for another gateway's sweeper).
    await journal?.close();
    await metricsServer?.close();
    await dispatchers.close();
    await logger.flush();
  }
}
