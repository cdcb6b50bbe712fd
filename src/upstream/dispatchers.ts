// Kept-alive undici connection pools, one per upstream origin and connect timeout, created on
// first use and reused by every request (the URL of an upstream is parsed once, not per request).
import { Pool } from 'undici';
import type { CatalogUpstream } from '../catalog/snapshot.js';
import { upstreamFormat } from '../formats/index.js';

export interface UpstreamTarget {
  pool: Pool;
  origin: string;
  /** Path of the generation endpoint at this upstream, e.g. `/v1/chat/completions` or `/v1/messages`. */
  path: string;
  host: string;
  port: number;
}

export class UpstreamDispatchers {
  private readonly pools = new Map<string, Pool>();
  /** Per upstream, its target for whole replies and for streams (a format may use two endpoints). */
  private readonly targets = new WeakMap<CatalogUpstream, readonly [UpstreamTarget, UpstreamTarget]>();

  /**
   * `connectionsPerOrigin` 0 (the default) leaves the pools unbounded: over HTTP/1.1 every open stream
   * holds a connection, and a fixed cap (it was 512) left request 513 waiting for a connection that
   * only a finished stream frees, with no first byte and no error.
   */
  constructor(private readonly connectionsPerOrigin = 0) {}

  target(upstream: CatalogUpstream, stream = false): UpstreamTarget {
    let targets = this.targets.get(upstream);
    if (targets === undefined) {
      const url = new URL(upstream.baseUrl);
      const basePath = url.pathname.replace(/\/+$/, '');
      const format = upstreamFormat(upstream.format);
      const poolKey = `${url.origin}|${upstream.timeouts.connectMs}`;
      let pool = this.pools.get(poolKey);
      if (pool === undefined) {
        pool = new Pool(url.origin, {
          connections: this.connectionsPerOrigin === 0 ? null : this.connectionsPerOrigin,
          connect: { timeout: upstream.timeouts.connectMs },
          keepAliveTimeout: 30_000,
        });
        this.pools.set(poolKey, pool);
      }
      const port = url.port !== '' ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
      const at = (path: string): UpstreamTarget => ({ pool, origin: url.origin, path, host: url.hostname, port });
      targets = [at(format.chatPath(basePath, upstream.upstreamModel, false)), at(format.chatPath(basePath, upstream.upstreamModel, true))];
      this.targets.set(upstream, targets);
    }
    return targets[stream ? 1 : 0];
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
  }
}
