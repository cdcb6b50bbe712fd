import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { COUNT_BUDGET_MS, countTokensHere, loadEncoder, PIECE_CHARS, pieces } from '../../src/wire/o200k-count.js';
import { countPromptTokens, countTokens, CountWorker, TEMPLATE_TOKENS_PER_MESSAGE } from '../../src/wire/token-count.js';

describe('token count', () => {
  it('counts o200k tokens of known text', async () => {
    // "hello world" is two o200k tokens; an empty piece adds nothing.
    expect(await countTokens(['hello world', ''])).toBe(2);
    expect(await countPromptTokens({ texts: ['hello world'], messages: 1, images: 0 })).toBe(2 + TEMPLATE_TOKENS_PER_MESSAGE);
  });

  it('counts text that spells a special token as plain text instead of throwing', async () => {
    // A prompt quoting <|endoftext|> must still be counted (and so charged) on a cut stream.
    await expect(countTokens(['before <|endoftext|> after'])).resolves.toBeGreaterThan(3);
    // As plain text it is several tokens, not the single special token id.
    expect(await countTokens(['<|endoftext|>'])).toBeGreaterThan(1);
  });

  it('loads the encoder once for concurrent callers', () => {
    expect(loadEncoder()).toBe(loadEncoder());
  });
});

const cpuMicros = (u: NodeJS.CpuUsage): number => u.user + u.system;

describe('token count off the event loop', () => {
  it('counts in another thread: this thread spends a small part of the CPU the count takes', async () => {
    // 50,000 distinct-ish CJK characters (one message): about 0.1 s of CPU to count. Measured as this
    // thread's CPU time, not wall time, so a busy shared machine cannot fail it (a wall-clock bound did).
    const cjk = Array.from({ length: 50_000 }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20000))).join('');
    await loadEncoder(); // the tables' load is not the count's CPU
    const here = process.threadCpuUsage();
    const exact = await countTokensHere([cjk], { budgetMs: 60_000 });
    const cpuHere = cpuMicros(process.threadCpuUsage(here));
    const worker = new CountWorker(60_000);
    await worker.count(['warm'], undefined); // the thread's start is not the count's either
    const there = process.threadCpuUsage();
    const n = await worker.count([cjk], 60_000);
    const cpuThere = cpuMicros(process.threadCpuUsage(there));
    expect(n).toBe(exact);
    // Counted here the whole count is this thread's; sent to the worker, only the message is.
    expect(cpuHere).toBeGreaterThan(10_000);
    expect(cpuThere).toBeLessThan(cpuHere / 4);
  });

  it('starts the worker on the first count and ends it, with its tables, after the idle time', async () => {
    const worker = new CountWorker(100);
    expect(worker.running).toBe(false);
    expect(await worker.count(['hello world'], undefined)).toBe(2);
    expect(worker.running).toBe(true);
    await new Promise((r) => setTimeout(r, 400));
    expect(worker.running).toBe(false);
    // The next count starts another.
    expect(await worker.count(['hello world', 'again'], undefined)).toBe(3);
    expect(worker.running).toBe(true);
  });

  it('counts long texts and many small ones, sent in parts, as the same texts counted whole', async () => {
    const worker = new CountWorker(60_000);
    const enc = await loadEncoder();
    // 70,000 emoji: 140,000 UTF-16 units, so parts of 65,536 units cut inside surrogate pairs.
    const emoji = '😀'.repeat(70_000);
    const prose = 'tokens before calling the upstream, '.repeat(5000);
    const many = Array.from({ length: 30_000 }, (_, i) => `delta ${i} `);
    const texts = [prose, '', emoji, ...many, 'tail'];
    const exact = await countTokensHere(texts, { budgetMs: 60_000 });
    expect(await worker.count(texts, 60_000)).toBe(exact);
    expect(exact).toBe(texts.reduce((n, t) => n + [...pieces(t)].reduce((m, p) => m + enc.countTokens(p, { disallowedSpecial: new Set() }), 0), 0));
  });

  it('answers concurrent counts each with its own figure', async () => {
    const worker = new CountWorker(60_000);
    const texts = ['hello world', 'a'.repeat(5000), 'Привет мир', '😀'.repeat(300), ''];
    const enc = await loadEncoder();
    const counts = await Promise.all(texts.map((t) => worker.count([t], undefined)));
    expect(counts).toEqual(texts.map((t) => (t === '' ? 0 : enc.countTokens(t))));
  });
});

describe('token count of hostile text: linear time, never a long stall', () => {
  const cjkWord = (n: number): string => Array.from({ length: n }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20000))).join('');

  it('cuts text into bounded pieces that join back to it, never inside a surrogate pair', () => {
    const texts = ['a'.repeat(1000), '😀'.repeat(700), `${'word '.repeat(300)}tail`, 'short', ''];
    for (const text of texts) {
      const parts = [...pieces(text)];
      expect(parts.join('')).toBe(text);
      for (const p of parts) {
        expect(p.length).toBeLessThanOrEqual(PIECE_CHARS);
        expect(p.length).toBeGreaterThan(0);
        expect(/^[\uDC00-\uDFFF]/.test(p)).toBe(false);
      }
    }
  });

  it('counts ordinary prose exactly as one whole count would', async () => {
    const enc = await loadEncoder();
    const words = ['billing', 'gateway', 'the', 'a', 'reservation', 'settles', 'tokens', 'of', 'Zürich', '12345', 'naïve'];
    const prose = Array.from({ length: 4000 }, (_, i) => words[(i * 7) % words.length]).join(' ');
    expect(prose.length).toBeGreaterThan(10 * PIECE_CHARS);
    expect(await countTokens([prose])).toBe(enc.countTokens(prose));
  });

  it('counts JSON text (tool definitions, arguments) exactly as one whole count would', async () => {
    const enc = await loadEncoder();
    await fc.assert(
      fc.asyncProperty(fc.array(fc.jsonValue({ maxDepth: 4 }), { minLength: 1, maxLength: 8 }), async (values) => {
        const text = JSON.stringify(values);
        expect(await countTokens([text])).toBe(enc.countTokens(text, { disallowedSpecial: new Set() }));
      }),
      { numRuns: 200 },
    );
  });

  it('keeps the event loop responsive while counting a 300 KB single word, and stays within the byte bound', async () => {
    const word = cjkWord(100_000); // 300 KB of UTF-8, one pre-token: 48 s of blocking before pieces
    let last = performance.now();
    let worstGap = 0;
    let ticks = 0;
    const timer = setInterval(() => {
      const t = performance.now();
      worstGap = Math.max(worstGap, t - last);
      last = t;
      ticks++;
    }, 1);
    const started = performance.now();
    const n = await countTokens([word]);
    const took = performance.now() - started;
    clearInterval(timer);
    expect(n).toBeGreaterThan(0);
    expect(n).toBeLessThanOrEqual(Buffer.byteLength(word));
    // Bounded in total (the budget, then the byte bound) and in every slice. The bounds are loose for
    // a shared CI machine; the tight figure (a stall under 20 ms) is measured in bench/token-count.ts.
    expect(took).toBeLessThan(COUNT_BUDGET_MS + 2000);
    expect(ticks).toBeGreaterThan(10);
    expect(worstGap).toBeLessThan(500);
  });

  it('yields after each slice and bounds the rest once the budget is spent', async () => {
    let clock = 0;
    // Every reading of the clock advances it 1 ms: a slice is a few pieces, the budget a few slices.
    const now = (): number => clock++;
    let yields = 0;
    let counting = true;
    const spin = (): void => {
      if (!counting) return;
      yields++;
      setImmediate(spin);
    };
    setImmediate(spin);
    const text = 'x'.repeat(PIECE_CHARS * 100);
    const n = await countTokensHere([text, 'hello world'], { now, budgetMs: 20 });
    counting = false;
    expect(yields).toBeGreaterThanOrEqual(3);
    // Past the budget the rest is the byte bound: far more than the exact count of a repeated letter.
    const exact = (await loadEncoder()).countTokens(text);
    expect(n).toBeGreaterThan(exact);
    expect(n).toBeLessThanOrEqual(text.length + 'hello world'.length);
  });
});
