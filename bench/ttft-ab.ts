// Time to first token of two builds (as bench/ab.ts takes them) and the floor, in interleaved rounds of
// sequential streams on the paced simulator: `npx tsx bench/ttft-ab.ts <dirA> <dirB> [rounds] [--format openai|anthropic]`.
// The full bench measures TTFT once per target (100 streams); one figure moved 0.2 ms between runs
// of the same code, so a change to the stream's path is judged here, against A again (A′).
import { startRedisServer } from '../test/helpers/redis-server.js';
import { requestShape, streamLatency, type BenchFormat } from './load.js';
import { median } from './report.js';
import { builtEntry, startTarget, type Target } from './targets.js';

const args = process.argv.slice(2);
const formatAt = args.indexOf('--format');
const format = (formatAt >= 0 ? args[formatAt + 1] : 'openai') as BenchFormat;
const [dirA, dirB, roundsArg] = args.filter((a, i) => !a.startsWith('--') && (formatAt < 0 || i !== formatAt + 1));
if (dirA === undefined || dirB === undefined) throw new Error('usage: tsx bench/ttft-ab.ts <dirA> <dirB> [rounds] [--format openai|anthropic]');
const rounds = Number(roundsArg ?? '5');
const entry = (dir: string) => builtEntry(`${dir}/.bench-build/bench/serve.js`);

const redis = await startRedisServer();
const paced = await startTarget({ role: 'simulator', firstTokenDelayMs: 5, tokenDelayMs: 2, replyTokens: 16 }, [], entry(dirA));
const floor = await startTarget({ role: 'floor', upstream: paced.url }, [], entry(dirA));
const gateway = (dir: string, ns: string) => startTarget({ role: 'gateway', redisUrl: redis.url, upstream: paced.url, namespace: ns, tracing: 'off' }, [], entry(dir));
const sides: [string, Target][] = [
  ['floor', floor],
  ['A', await gateway(dirA, 'ttft-a')],
  ['B', await gateway(dirB, 'ttft-b')],
  ['A2', await gateway(dirA, 'ttft-a2')],
];
const ttft = new Map<string, number[]>(sides.map(([name]) => [name, []]));
for (const [, t] of sides) await streamLatency(t.url, requestShape(format, t.key, true), format, 50); // warm-up
for (let i = 0; i < rounds; i++) {
  for (let j = 0; j < sides.length; j++) {
    const [name, t] = sides[(i + j) % sides.length] as [string, Target];
    ttft.get(name)?.push((await streamLatency(t.url, requestShape(format, t.key, true), format, 100)).ttftP50);
  }
}
const floorP50 = median(ttft.get('floor') ?? []) ?? NaN;
for (const [name, xs] of ttft) {
  const p50 = median(xs) ?? NaN;
  console.log(`${name}: TTFT p50 ${p50.toFixed(3)} ms (rounds ${xs.map((x) => x.toFixed(3)).join(', ')}), added over the floor ${(p50 - floorP50).toFixed(3)} ms`);
}
for (const [, t] of sides) await t.stop();
await paced.stop();
await redis.stop();
