// Which Redis the ledger uses, from REDIS_URL and REDIS_CLUSTER_NODES.
import { describe, expect, it } from 'vitest';
import { ledgerRedisTarget } from '../../src/backend-from-config.js';
import { redisTarget } from '../../src/billing/redis-target.js';
import { readConfig } from '../../src/config.js';

describe('redisTarget', () => {
  it('is the memory ledger without either setting, one server for a redis:// URL', () => {
    expect(redisTarget(undefined, undefined)).toBeUndefined();
    expect(redisTarget('', '')).toBeUndefined();
    expect(redisTarget('redis://:pw@r:6379/0', undefined)).toEqual({ kind: 'single', url: 'redis://:pw@r:6379/0' });
  });

  it('reads a cluster from REDIS_CLUSTER_NODES, with credentials and TLS from a REDIS_URL beside it', () => {
    expect(redisTarget(undefined, 'redis-0:6379, redis-1:6380,')).toEqual({
      kind: 'cluster', nodes: [{ host: 'redis-0', port: 6379 }, { host: 'redis-1', port: 6380 }], tls: false,
    });
    expect(redisTarget('rediss://app:s%40cret@ignored:1', '10.0.0.1:7000')).toEqual({
      kind: 'cluster', nodes: [{ host: '10.0.0.1', port: 7000 }], username: 'app', password: 's@cret', tls: true,
    });
    expect(redisTarget(undefined, '[::1]:7000')).toMatchObject({ nodes: [{ host: '::1', port: 7000 }] });
  });

  it('reads a cluster from a redis+cluster:// URL', () => {
    expect(redisTarget('redis+cluster://a:7000,b:7001', undefined)).toEqual({
      kind: 'cluster', nodes: [{ host: 'a', port: 7000 }, { host: 'b', port: 7001 }], tls: false,
    });
    expect(redisTarget('rediss+cluster://:pw@a:7000/', undefined)).toEqual({
      kind: 'cluster', nodes: [{ host: 'a', port: 7000 }], password: 'pw', tls: true,
    });
    expect(redisTarget('redis+cluster://user:pw@a:7000', undefined)).toMatchObject({ username: 'user', password: 'pw' });
  });

  it('refuses a node that is not host:port, naming the setting and without echoing credentials', () => {
    expect(() => redisTarget(undefined, 'redis-0')).toThrow(/REDIS_CLUSTER_NODES: "redis-0" is not host:port/);
    expect(() => redisTarget(undefined, 'a:0')).toThrow(/not host:port/);
    expect(() => redisTarget(undefined, 'a:70000')).toThrow(/not host:port/);
    expect(() => redisTarget(undefined, ' , ')).toThrow(/names no cluster node/);
    let message = '';
    try {
      redisTarget('redis+cluster://u:topsecret@a:7000,b', undefined);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/REDIS_URL: "b" is not host:port/);
    expect(message).not.toContain('topsecret');
  });

  it('is what the gateway configuration names', () => {
    expect(ledgerRedisTarget(readConfig({ REDIS_CLUSTER_NODES: 'a:1,b:2' }))).toMatchObject({ kind: 'cluster' });
    expect(ledgerRedisTarget(readConfig({ REDIS_URL: 'redis+cluster://a:1' }))).toMatchObject({ kind: 'cluster' });
    expect(ledgerRedisTarget(readConfig({ REDIS_URL: 'redis://a:1' }))).toMatchObject({ kind: 'single' });
    expect(ledgerRedisTarget(readConfig({}))).toBeUndefined();
  });
});
