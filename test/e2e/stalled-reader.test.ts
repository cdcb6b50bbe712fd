// A streaming client that stops reading (its socket open, its receive window full) does not keep the
// exchange alive past a write deadline: the response is cut, the upstream call is aborted, and the
// request is settled for what was generated, with no hold left. On 7339c82 the write waited for a
// 'drain' that never came, for as long as the request timeout (10 minutes by default).
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { until } from './e2e-support.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ config: { clientWriteTimeoutMs: 300 } });
});
afterAll(() => h.close());

describe('a client that stops reading', () => {
  it('has its stream cut after the write deadline, and is charged for what was generated', async () => {
    const body = JSON.stringify({ model: 'outlaw-1-xploded', stream: true, max_tokens: 60_000, sim_reply_tokens: 60_000, messages: [{ role: 'user', content: 'Tell me everything.' }] });
    const url = new URL(h.baseUrl);
    const socket = connect(Number(url.port), url.hostname);
    await new Promise<void>((r) => socket.once('connect', () => r()));
    // The smallest receive buffer the kernel allows, and no reading at all: the gateway's writes stall.
    socket.setNoDelay(true);
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${h.key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    socket.pause();
    try {
      const record = await until(
        'the stalled exchange is settled',
        async () => (await h.backend.ledger.listUsage(h.accountId, { limit: 10 }))[0],
        15_000,
      );
      expect(record.status).toBe('client_cancelled');
      expect(record.usage.output).toBeGreaterThan(0);
      expect(record.usage.output).toBeLessThan(60_000);
      expect(record.cost).toBeGreaterThan(0);
      // Nothing is left running upstream: the call was aborted, or had already written its last byte.
      await until(
        'the upstream call is over',
        async () => {
          const sim = h.simulator.requests.find((r) => r.path === '/v1/chat/completions');
          return sim !== undefined && (sim.aborted || sim.finished) ? true : undefined;
        },
        5000,
      );
      const audit = await h.backend.ledger.audit(h.accountId);
      expect(audit.difference).toBe(0);
      expect(audit.holdsOutstanding).toBe(0);
    } finally {
      socket.destroy();
    }
  });
});
