// The usage record is complete (issue 29, item 7): every request's record of PostgreSQL keeps the
// finish reason, the HTTP status the client got, the upstream that served it, whether the model refused,
// its latency and (streams) its time to the first token; the dashboard's request view, CSV and JSON
// show them, and the refund page says when the model refused. And refusals are not written one row
// each (item 6): a key refused in a loop gets one row a minute, every refusal still counted in the
// metrics. Real gateway over loopback with the official openai client, a real Redis hot path and the
// journal to a real PostgreSQL.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refundRequestPage } from '../../src/dashboard/usage-pages.js';
import { usageCsvStream } from '../../src/dashboard/usage-view.js';
import { findUsage } from '../../src/record/usage-query.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { useTestDatabase } from '../helpers/test-database.js';

const testDb = useTestDatabase('usage_detail');
let h: Harness;
let refuser: Server;

/** An OpenAI-compatible upstream whose model always declines (finish_reason content_filter). */
async function startRefusingUpstream(): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'chatcmpl-refused',
          object: 'chat.completion',
          created: 0,
          model: 'refuser',
          choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: 'I cannot help with that.' }, finish_reason: 'content_filter' }],
          usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
}

beforeAll(async () => {
  const up = await startRefusingUpstream();
  refuser = up.server;
  h = await startHarness({
    ledger: 'redis',
    record: testDb.db,
    models: (models) => [...models, { ...(models[0] as (typeof models)[number]), id: 'refuser-1', aliases: [], upstreams: [{ name: 'strict-upstream', format: 'openai', baseUrl: up.url, model: 'refuser' }] }],
  });
});
afterAll(async () => {
  await h.close();
  await new Promise<void>((r) => refuser.close(() => r()));
});

const client = () => new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });

async function recordOf(requestId: string) {
  await h.settled();
  await h.journal?.flush();
  const r = await findUsage(testDb.db, h.accountId, requestId);
  expect(r, requestId).toBeDefined();
  return r as NonNullable<typeof r>;
}

describe('the usage record keeps how each request ended', () => {
  it('a completed answer: finish reason, HTTP 200, the upstream, its latency', async () => {
    const { data, response } = await client().chat.completions.create({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 }).withResponse();
    expect(data.choices[0]?.finish_reason).toBeDefined();
    const r = await recordOf(response.headers.get('x-request-id') ?? '');
    expect(r.finishReason).toBe(data.choices[0]?.finish_reason);
    expect(r.httpStatus).toBe(200);
    expect(r.upstream).toBe('sim');
    expect(r.modelRefused).toBe(false);
    expect(r.latencyMs).toBeGreaterThanOrEqual(0);
  });

  it('a stream: its time to the first token, no later than its end', async () => {
    const stream = await client().chat.completions.create({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'stream please' }], stream: true, max_tokens: 200 }).withResponse();
    for await (const chunk of stream.data) void chunk;
    const r = await recordOf(stream.response.headers.get('x-request-id') ?? '');
    expect(r.ttftMs).not.toBeNull();
    expect(r.ttftMs ?? Infinity).toBeLessThanOrEqual(r.latencyMs);
    expect(r.finishReason).toBe('stop');
    expect(r.httpStatus).toBe(200);
  });

  it('a model that refused is marked, and the CSV and the refund page say so', async () => {
    const { data, response } = await client().chat.completions.create({ model: 'refuser-1', messages: [{ role: 'user', content: 'something it declines' }], max_tokens: 20 }).withResponse();
    expect(data.choices[0]?.finish_reason).toBe('content_filter');
    const id = response.headers.get('x-request-id') ?? '';
    const r = await recordOf(id);
    expect(r.modelRefused).toBe(true);
    expect(r.upstream).toBe('strict-upstream');
    let csv = '';
    for await (const chunk of await usageCsvStream(testDb.db, h.accountId, { requestId: id }, new Map())) csv += String(chunk);
    const [header, row] = csv.split('\r\n');
    const cells = (header ?? '').split(',');
    const values = (row ?? '').split(',');
    expect(values[cells.indexOf('model_refused')]).toBe('true');
    expect(values[cells.indexOf('upstream')]).toBe('strict-upstream');
    expect(values[cells.indexOf('http_status')]).toBe('200');
    expect(values[cells.indexOf('finish_reason')]).toBe('content_filter');
    const page = String(refundRequestPage({ user: { id: 'u', email: 'e2e@example.com', role: 'holder', accountId: h.accountId, emailVerified: true, totpEnabled: false }, csrfToken: 'x', expiresAt: new Date(Date.now() + 60_000), secondFactor: false, memberships: [] }, r));
    expect(page).toContain('the model refused to answer');
    expect(page).toContain('strict-upstream · HTTP 200');
  });
});

describe('refusals are counted, not written one row each', () => {
  it('a key refused 40 times in a row gets one usage record; the metrics count all 40', async () => {
    const broke = await h.backend.accounts.createAccount('broke');
    const key = await h.backend.accounts.createKey(broke.id, { name: 'empty' });
    const c = new OpenAI({ apiKey: key.secret, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 });
    const metricsBefore = await h.gateway.metrics.registry.metrics();
    const refusedBefore = refusedCount(metricsBefore);
    let refused = 0;
    for (let i = 0; i < 40; i++) {
      await c.chat.completions.create({ model: 'outlaw-1-xploded', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 }).catch((err: { status?: number }) => {
        if (err.status === 402) refused++;
      });
    }
    expect(refused).toBe(40);
    await h.settled();
    await h.journal?.flush();
    const rows = await testDb.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1 AND status = 'refused'`, [broke.id]);
    expect(rows.rows[0]?.n).toBe(1);
    const metricsAfter = await h.gateway.metrics.registry.metrics();
    expect(refusedCount(metricsAfter) - refusedBefore).toBe(40);
  });
});

/** The sum of tollgate_reservations_total over refused outcomes. */
function refusedCount(text: string): number {
  let n = 0;
  for (const line of text.split('\n')) if (line.startsWith('tollgate_reservations_total{') && line.includes('outcome="refused"')) n += Number(line.split(' ').pop());
  return n;
}
