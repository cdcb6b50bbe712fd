// Gateway configuration, read once from the environment at start-up.
import { fileURLToPath } from 'node:url';

/**
 * examples/catalog.yaml of the checkout or image, from this module's URL: src/config.ts when run from
 * source, dist/src/config.js when compiled (the image copies examples/ beside dist/, not into it).
 */
export function defaultCatalogFile(moduleUrl: string): string {
  const compiled = /\/dist\/src\/[^/]+$/.test(new URL(moduleUrl).pathname);
  return fileURLToPath(new URL(compiled ? '../../examples/catalog.yaml' : '../examples/catalog.yaml', moduleUrl));
}

export interface GatewayConfig {
  port: number;
  host: string;
  metricsPort: number;
  adminPort: number;
  /** Admin API bearer token; the admin interface is off when empty. */
  adminToken: string;
  /** The `<marker>` of `sk-<marker>-<random>`. */
  keyMarker: string;
  redisUrl: string | undefined;
  /** REDIS_CLUSTER_NODES: host:port,host:port of a Redis Cluster (else a redis+cluster:// REDIS_URL names one). */
  redisClusterNodes: string | undefined;
  /** PostgreSQL of record (DATABASE_URL); without it the local run keeps its record in PGlite under dataDir. */
  databaseUrl: string | undefined;
  /** Where the embedded PostgreSQL (PGlite) of the local run keeps its files. */
  dataDir: string;
  catalogFile: string;
  /** Largest request body accepted, in bytes (413 above it). */
  maxBodyBytes: number;
  /** Longest the request body may take to arrive after the key is accepted (408 after). */
  bodyReadTimeoutMs: number;
  /** Longest a whole upstream exchange may take; holds live this long plus a margin. */
  requestTimeoutMs: number;
  holdMarginMs: number;
  /**
   * The window of the keys' request and token limits (RPM, TPM): 60,000 ms, as their names say. Tests
   * shorten it so a retry after a refusal does not wait a minute; a limit then counts per this window.
   */
  rateLimitWindowMs: number;
  reaperIntervalMs: number;
  /** How long a key lookup is trusted before it is read again (revocation latency bound). */
  keyCacheTtlMs: number;
  /** Refusals of unrecognised keys per client address per minute before further ones get 429; 0: no limit. */
  keyRefusalsPerMinute: number;
  /** Record look-ups per second of key hashes Redis's complete directory does not know (late pushes). */
  unknownKeyLookupsPerSecond: number;
  /** Behind a proxy that appends the client to X-Forwarded-For (the chart's ingress): count that hop. */
  trustProxy: boolean;
  usageMaxRecords: number;
  /** Per account: most bytes and responses the Responses API keeps (oldest first out). */
  storedResponsesMaxBytes: number;
  storedResponsesMaxCount: number;
  /**
   * Most connections to one upstream origin; 0 means no limit (the default). A stream holds its
   * connection until it ends, so a cap here is a cap on concurrent streams to that provider.
   */
  upstreamMaxConnections: number;
  /** Oldest settlement PostgreSQL may lack before new requests are refused with 503 (fail closed). */
  journalMaxLagMs: number;
  /**
   * After a Redis wipe, how long an account reloaded from the record refuses new holds while the other
   * gateways commit what they settled before the wipe (their journal writers commit every 100 ms and
   * catch up every second), so no cap is passed on figures that miss those settlements.
   */
  rebuildWindowMs: number;
  /**
   * Signs the reasoning the Responses API hands clients in encrypted_content. Every gateway of a
   * deployment needs the same one (set from a Secret); unset, each process makes its own.
   */
  reasoningKey: string;
  /** Pause between reconciliations of PostgreSQL and the hot path; 0 turns the periodic job off. */
  reconcileIntervalMs: number;
  /** Audit log entries older than this many days are pruned daily (the chain's anchor kept); 0 keeps every entry. */
  auditRetentionDays: number;
  /** A Redis command not answered in this long fails (the ledger counts as down, requests get 503). */
  redisCommandTimeoutMs: number;
  /** On shutdown, how long settlements that failed are retried before they are abandoned. */
  settlementFlushMs: number;
  /** A stream write waiting this long for a client that stopped reading cuts the response. */
  clientWriteTimeoutMs: number;
  /** A stream silent this long gets an SSE keep-alive comment (0: never). */
  streamKeepAliveMs: number;
  /**
   * On SIGTERM, how long open requests may run to completion; past it they are ended in the client's
   * format and settled for what was generated. The chart's grace period must exceed it plus preStop.
   */
  drainTimeoutMs: number;
  /**
   * How often the production entry checks whether it has gone idle and may give back the heap pages
   * its start or its last burst of load grew (0: never; src/runtime/memory-reducer.ts).
   */
  memoryReducerIntervalMs: number;
}

function atLeast(min: number, value: number, name: string): number {
  if (value < min) throw new Error(`${name} must be at least ${min}, got ${value}`);
  return value;
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new Error(`${name} must be a non-negative integer, got "${raw}"`);
  }
  return value;
}

export function readConfig(env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const keyMarker = env.TOLLGATE_KEY_MARKER ?? 'tg';
  if (!/^[a-z0-9]{1,12}$/.test(keyMarker)) {
    throw new Error(`TOLLGATE_KEY_MARKER must be 1-12 lowercase letters or digits, got "${keyMarker}"`);
  }
  return {
    port: int(env, 'PORT', 8080),
    host: env.HOST ?? '127.0.0.1',
    metricsPort: int(env, 'METRICS_PORT', 9090),
    adminPort: int(env, 'ADMIN_PORT', 8081),
    adminToken: env.TOLLGATE_ADMIN_TOKEN ?? '',
    keyMarker,
    redisUrl: env.REDIS_URL || undefined,
    redisClusterNodes: env.REDIS_CLUSTER_NODES || undefined,
    databaseUrl: env.DATABASE_URL || undefined,
    dataDir: env.TOLLGATE_DATA_DIR || '.tollgate-data',
    catalogFile: env.TOLLGATE_CATALOG_FILE || defaultCatalogFile(import.meta.url),
    maxBodyBytes: int(env, 'TOLLGATE_MAX_BODY_BYTES', 32 * 1024 * 1024),
    bodyReadTimeoutMs: int(env, 'TOLLGATE_BODY_READ_TIMEOUT_MS', 60 * 1000),
    requestTimeoutMs: int(env, 'TOLLGATE_REQUEST_TIMEOUT_MS', 10 * 60 * 1000),
    holdMarginMs: int(env, 'TOLLGATE_HOLD_MARGIN_MS', 60 * 1000),
    rateLimitWindowMs: atLeast(100, int(env, 'TOLLGATE_RATE_LIMIT_WINDOW_MS', 60 * 1000), 'TOLLGATE_RATE_LIMIT_WINDOW_MS'),
    reaperIntervalMs: int(env, 'TOLLGATE_REAPER_INTERVAL_MS', 5 * 1000),
    journalMaxLagMs: int(env, 'TOLLGATE_JOURNAL_MAX_LAG_MS', 120 * 1000),
    rebuildWindowMs: int(env, 'TOLLGATE_REBUILD_WINDOW_MS', 2000),
    reasoningKey: env.TOLLGATE_REASONING_KEY ?? '',
    reconcileIntervalMs: int(env, 'TOLLGATE_RECONCILE_INTERVAL_MS', 15 * 60 * 1000),
    memoryReducerIntervalMs: int(env, 'TOLLGATE_MEMORY_REDUCER_INTERVAL_MS', 8000),
    auditRetentionDays: int(env, 'TOLLGATE_AUDIT_RETENTION_DAYS', 400),
    keyCacheTtlMs: int(env, 'TOLLGATE_KEY_CACHE_TTL_MS', 1000),
    keyRefusalsPerMinute: int(env, 'TOLLGATE_KEY_REFUSALS_PER_MINUTE', 60),
    unknownKeyLookupsPerSecond: int(env, 'TOLLGATE_UNKNOWN_KEY_LOOKUPS_PER_SECOND', 5),
    trustProxy: env.TOLLGATE_TRUST_PROXY === 'true',
    usageMaxRecords: int(env, 'TOLLGATE_USAGE_MAX_RECORDS', 10_000),
    storedResponsesMaxBytes: int(env, 'TOLLGATE_STORED_RESPONSES_MAX_BYTES', 256 * 1024 * 1024),
    storedResponsesMaxCount: int(env, 'TOLLGATE_STORED_RESPONSES_MAX_COUNT', 10_000),
    upstreamMaxConnections: int(env, 'TOLLGATE_UPSTREAM_MAX_CONNECTIONS', 0),
    redisCommandTimeoutMs: int(env, 'TOLLGATE_REDIS_COMMAND_TIMEOUT_MS', 1000),
    settlementFlushMs: int(env, 'TOLLGATE_SETTLEMENT_FLUSH_MS', 10 * 1000),
    clientWriteTimeoutMs: int(env, 'TOLLGATE_CLIENT_WRITE_TIMEOUT_MS', 30 * 1000),
    streamKeepAliveMs: int(env, 'TOLLGATE_STREAM_KEEPALIVE_MS', 15 * 1000),
    drainTimeoutMs: int(env, 'TOLLGATE_DRAIN_TIMEOUT_MS', 25 * 1000),
  };
}
