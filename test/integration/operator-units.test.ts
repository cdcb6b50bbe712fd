// The operator's building blocks on their own: the work queue's guarantees, condition transitions,
// the write-only-on-change rule, and the upstream probe against loopback servers.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { modelsUrl, probeHeaders, probeUpstream } from '../../operator/probe.js';
import { WorkQueue } from '../../operator/queue.js';
import { setCondition, statusNeedsWrite } from '../../operator/status.js';
import type { ModelCatalogStatus } from '../../src/catalog/types.js';
import { freePort } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/kube-fixtures.js';

describe('WorkQueue', () => {
  it('deduplicates waiting keys and never runs one key twice at once', async () => {
    const queue = new WorkQueue({ baseDelayMs: 5 });
    const calls: string[] = [];
    let active = 0;
    let maxActive = 0;
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    queue.add('a');
    queue.add('a');
    queue.add('b');
    const running = queue.run(4, async (key) => {
      calls.push(key);
      if (key === 'a') {
        active += 1;
        maxActive = Math.max(maxActive, active);
        await gate;
        active -= 1;
      }
    });
    await waitFor('a started', () => calls.includes('a'));
    queue.add('a'); // while a is processing: replayed after, not in parallel
    queue.add('a');
    release();
    await waitFor('a replayed once', () => calls.filter((k) => k === 'a').length === 2);
    await new Promise((r) => setTimeout(r, 30));
    expect(calls.filter((k) => k === 'a')).toHaveLength(2);
    expect(calls.filter((k) => k === 'b')).toHaveLength(1);
    expect(maxActive).toBe(1);
    queue.shutdown();
    await running;
  });

  it('retries failures with growing backoff and honours requeueAfterMs', async () => {
    const queue = new WorkQueue({ baseDelayMs: 20, maxDelayMs: 1000 });
    const times: number[] = [];
    queue.add('k');
    const running = queue.run(1, (key) => {
      times.push(Date.now());
      if (times.length < 4) return Promise.reject(new Error(`fail ${key}`));
      return Promise.resolve(times.length === 4 ? { requeueAfterMs: 50 } : {});
    });
    await waitFor('five calls', () => times.length >= 5, 3000);
    const gaps = times.slice(1).map((t, i) => t - (times[i] ?? t));
    expect(gaps[0]).toBeGreaterThanOrEqual(15); // 20 ms
    expect(gaps[1]).toBeGreaterThanOrEqual(35); // 40 ms
    expect(gaps[2]).toBeGreaterThanOrEqual(75); // 80 ms
    expect(gaps[3]).toBeGreaterThanOrEqual(45); // requeueAfterMs 50
    queue.shutdown();
    await running;
  });
});

describe('status', () => {
  it('moves lastTransitionTime only when a condition flips', () => {
    const t1 = new Date('2026-01-01T00:00:00Z');
    const t2 = new Date('2026-01-01T00:05:00Z');
    const c1 = setCondition(undefined, { type: 'Ready', status: 'True', reason: 'A', message: 'm' }, 1, t1);
    const c2 = setCondition(c1, { type: 'Ready', status: 'True', reason: 'B', message: 'n' }, 2, t2);
    expect(c2[0]).toMatchObject({ reason: 'B', lastTransitionTime: '2026-01-01T00:00:00Z', observedGeneration: 2 });
    const c3 = setCondition(c2, { type: 'Ready', status: 'False', reason: 'C', message: 'o' }, 2, t2);
    expect(c3[0]?.lastTransitionTime).toBe('2026-01-01T00:05:00Z');
    const both = setCondition(c3, { type: 'Valid', status: 'True', reason: 'V', message: '' }, 2, t2);
    expect(both.map((c) => c.type)).toEqual(['Valid', 'Ready']);
  });

  it('writes on real changes, not on probe times alone until they are stale', () => {
    const status = (healthy: boolean, time: string, latencyMs: number): ModelCatalogStatus => ({
      observedGeneration: 1,
      models: [{ id: 'm', ready: healthy, upstreams: [{ name: 'u', healthy, lastProbeTime: time, latencyMs }] }],
    });
    const now = Date.parse('2026-01-01T00:01:00Z');
    const prev = status(true, '2026-01-01T00:00:00Z', 10);
    expect(statusNeedsWrite(prev, status(true, '2026-01-01T00:01:00Z', 12), now, 300_000)).toBe(false);
    expect(statusNeedsWrite(prev, status(false, '2026-01-01T00:01:00Z', 12), now, 300_000)).toBe(true);
    expect(statusNeedsWrite(prev, status(true, '2026-01-01T00:06:00Z', 12), now + 300_000, 300_000)).toBe(true);
    expect(statusNeedsWrite(undefined, prev, now, 300_000)).toBe(true);
  });
});

describe('probe', () => {
  it('builds the models URL and auth header of each wire format', () => {
    expect(modelsUrl('http://h/v1/', 'openai')).toBe('http://h/v1/models');
    expect(modelsUrl('http://h', 'anthropic')).toBe('http://h/v1/models');
    expect(probeHeaders({ baseUrl: '', format: 'openai', credential: 's' }).authorization).toBe('Bearer s');
    expect(probeHeaders({ baseUrl: '', format: 'anthropic', credential: 's' })['x-api-key']).toBe('s');
    expect(probeHeaders({ baseUrl: '', format: 'openai', credential: 's', credentialsHeader: 'x-api-key' })['x-api-key']).toBe('s');
  });

  it('reports status, refusal and timeout without leaking the credential', async () => {
    const server = createServer((req, res) => {
      if (req.url === '/slow/v1/models') return; // never answers
      res.writeHead(req.headers['x-api-key'] === 'sk-secret-value' ? 200 : 401).end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const ok = await probeUpstream({ baseUrl: base, format: 'anthropic', credential: 'sk-secret-value' }, 1000);
      expect(ok).toMatchObject({ healthy: true });
      const denied = await probeUpstream({ baseUrl: base, format: 'anthropic', credential: 'sk-wrong-value' }, 1000);
      expect(denied.healthy).toBe(false);
      expect(denied.message).toContain('401');
      expect(denied.message).not.toContain('sk-wrong-value');
      const slow = await probeUpstream({ baseUrl: `${base}/slow`, format: 'anthropic', credential: 'sk-secret-value' }, 100);
      expect(slow.healthy).toBe(false);
      expect(slow.message).toContain('no response within 100 ms');
      const refused = await probeUpstream({ baseUrl: `http://127.0.0.1:${await freePort()}/v1`, format: 'openai' }, 1000);
      expect(refused).toMatchObject({ healthy: false });
      expect(refused.message).toContain('ECONNREFUSED');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
