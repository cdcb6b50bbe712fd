import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { createLogger, scrubSecrets } from '../../src/telemetry/logger.js';

function capture(level = 'info'): { lines: () => Record<string, unknown>[]; raw: () => string; logger: ReturnType<typeof createLogger> } {
  const chunks: string[] = [];
  const logger = createLogger({ level, destination: { write: (s: string) => void chunks.push(s) } });
  return {
    logger,
    raw: () => chunks.join(''),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

const KEY = 'sk-tg-3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c';
const UPSTREAM_KEY = 'sk-proj-AbCdEfGhIjKlMnOpQrStUvWx';

describe('request log', () => {
  it('writes one JSON line with the request fields', () => {
    const { logger, lines } = capture();
    logger.logRequest({
      requestId: 'req-1',
      keyId: 'key_01',
      accountId: 'acct_01',
      model: 'm1',
      route: '/v1/chat/completions',
      status: 200,
      inputTokens: 10,
      outputTokens: 20,
      cost: 1234,
      latencyMs: 87,
      traceId: 'abc',
    });
    const [line, ...rest] = lines();
    expect(rest).toHaveLength(0);
    expect(line).toMatchObject({
      level: 30,
      msg: 'request',
      requestId: 'req-1',
      keyId: 'key_01',
      accountId: 'acct_01',
      model: 'm1',
      route: '/v1/chat/completions',
      status: 200,
      inputTokens: 10,
      outputTokens: 20,
      costMicroUsd: 1234,
      latencyMs: 87,
      traceId: 'abc',
    });
    expect(typeof line!.time).toBe('string');
  });

  it('logs only the listed fields, and 5xx at warn level', () => {
    const { logger, lines } = capture();
    const entry = { requestId: 'r', route: '/v1/messages', status: 502, latencyMs: 1, errorCode: 'upstream_error', authorization: `Bearer ${KEY}` };
    logger.logRequest(entry);
    const [line] = lines();
    expect(line!.level).toBe(40);
    expect(line!.errorCode).toBe('upstream_error');
    expect(line).not.toHaveProperty('authorization');
  });

  it('honours the level (LOG_LEVEL) and ignores an unknown one', () => {
    const quiet = capture('warn');
    quiet.logger.logRequest({ requestId: 'r', route: '/v1/models', status: 200, latencyMs: 1 });
    expect(quiet.lines()).toHaveLength(0);
    const fallback = capture('loud');
    expect(fallback.logger.log.level).toBe('info');
  });

  it('says which request lines its level writes, so a dropped line is not even built', () => {
    const quiet = capture('warn').logger;
    expect(quiet.logsRequest(200)).toBe(false);
    expect(quiet.logsRequest(502)).toBe(true);
    expect(capture('info').logger.logsRequest(200)).toBe(true);
    expect(capture('silent').logger.logsRequest(500)).toBe(false);
  });
});

describe('redaction', () => {
  it('never writes an authorization or x-api-key header or anything that looks like a key', () => {
    const { logger, raw } = capture('debug');
    logger.log.info({ headers: { authorization: `Bearer ${KEY}`, 'x-api-key': KEY, host: 'gw' } }, 'incoming');
    logger.log.info({ req: { headers: { authorization: `Bearer ${KEY}`, 'x-api-key': UPSTREAM_KEY } } }, 'nested');
    logger.log.info({ authorization: `Bearer ${KEY}`, 'x-api-key': KEY }, 'top level');
    logger.log.warn(`upstream said: invalid api key ${UPSTREAM_KEY}`);
    logger.log.error({ err: new Error(`Incorrect API key provided: ${KEY}`) }, 'upstream failed');
    logger.log.debug({ upstreamRequest: { Authorization: `Bearer opaque-token-without-prefix` } }, 'sent');
    logger.log.info({ note: 'header was "Authorization: Bearer opaque123456"' }, 'free text');
    logger.logRequest({ requestId: KEY, route: '/v1/chat/completions', status: 401, latencyMs: 1, errorCode: 'invalid_api_key' });

    const out = raw();
    expect(out.split('\n').filter(Boolean)).toHaveLength(8);
    expect(out).not.toContain(KEY);
    expect(out).not.toContain(UPSTREAM_KEY);
    expect(out).not.toContain('3f9a8b7c6d5e');
    expect(out).not.toContain('opaque-token-without-prefix');
    expect(out).not.toContain('opaque123456');
    expect(out).toContain('[REDACTED]');
    expect(out).toContain('"host":"gw"'); // redaction is targeted, not wholesale
  });

  it("never writes the other providers' keys: Gemini's x-goog-api-key header, AIza…, xai-…, gsk_… in free text", () => {
    const { logger, raw } = capture('debug');
    const google = 'AIzaSyD4f7Kq9XbT2mWc8LpR0vNe3HjU6sYgA1z';
    logger.log.info({ headers: { 'x-goog-api-key': 'opaque-gemini-credential-1' } }, 'sent');
    logger.log.info({ req: { headers: { 'x-goog-api-key': 'opaque-gemini-credential-2' } } }, 'nested');
    logger.log.warn(`upstream said: API key not valid: ${google}; also xai-Q2w3E4r5T6y7U8i9 and gsk_Z1x2C3v4B5n6M7a8`);
    const out = raw();
    for (const secret of ['opaque-gemini-credential-1', 'opaque-gemini-credential-2', google, 'xai-Q2w3E4r5T6y7U8i9', 'gsk_Z1x2C3v4B5n6M7a8']) expect(out).not.toContain(secret);
    expect(out).toContain('upstream said: API key not valid');
  });

  it('scrubSecrets leaves ordinary text alone', () => {
    expect(scrubSecrets('task-list and desk-lamp, sk-1')).toBe('task-list and desk-lamp, sk-1');
    expect(scrubSecrets(`a ${KEY} b`)).toBe('a sk-[REDACTED] b');
  });
});

describe('destination', () => {
  it('defaults to stdout, written line by line as it happens', () => {
    const { log } = createLogger({ level: 'info' });
    const stream = (log as unknown as Record<symbol, unknown>)[pino.symbols.streamSym] as {
      sync: boolean;
      minLength: number;
      fd: number;
    };
    expect(stream.sync).toBe(true);
    expect(stream.minLength).toBe(0);
    expect(stream.fd).toBe(1);
  });

  it('keeps the request lines written before a crash (SIGKILL right after logging)', () => {
    // On 7339c82 the lines sat in a 4 KB buffer and a killed process lost them.
    const logger = new URL('../../src/telemetry/logger.ts', import.meta.url).href;
    const script = `import { createLogger } from ${JSON.stringify(logger)};
      const l = createLogger({ level: 'info' });
      for (let i = 0; i < 3; i++) l.logRequest({ requestId: 'before-crash-' + i, route: '/v1/models', status: 200, latencyMs: 1 });
      process.kill(process.pid, 'SIGKILL');`;
    const out = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(out.signal).toBe('SIGKILL');
    for (let i = 0; i < 3; i++) expect(out.stdout).toContain(`"requestId":"before-crash-${i}"`);
  });
});

describe('buffering', () => {
  it('buffers request lines in memory and writes them on flush', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'tollgate-log-')), 'out.log');
    const dest = pino.destination({ dest: file, sync: false, minLength: 4096 });
    await once(dest, 'ready');
    const logger = createLogger({ level: 'info', destination: dest });
    logger.logRequest({ requestId: 'buffered-1', route: '/v1/models', status: 200, latencyMs: 2 });
    expect(readFileSync(file, 'utf8')).toBe(''); // not written synchronously on the request path
    await logger.flush();
    expect(readFileSync(file, 'utf8')).toContain('"requestId":"buffered-1"');
    dest.end();
  });
});
