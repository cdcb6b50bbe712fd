// The floor's and the gateway's CPU per request at one fixed rate, small and agent-shaped bodies
// (bench/load.ts), each measured alone: at the same rate the gateway's batching (auto-pipelined Redis
// commands, grouped settlements) is the same for both bodies, so agent minus small, gateway against
// floor, is what the gateway does per byte of body. Agent bodies hold the bench's load generator to a
// few hundred requests a second, where the gateway's fixed cost per request is higher than at 6,000.
// `npx tsx bench/agent-rate.ts [openai|anthropic] [checkout with .bench-build/] [req/s] [perf.data prefix]`
// (the last: `perf record` of the gateway during each measured window, started with --perf-basic-prof).
import { startRedisServer } from '../test/helpers/redis-server.js';
import { agentShape, requestShape, throughput, type BenchFormat } from './load.js';
import { builtEntry, cpuTimes, startTarget } from './targets.js';
import { spawn } from 'node:child_process';
const perf = process.argv[5];
const format = (process.argv[2] ?? 'openai') as BenchFormat;
const dir = process.argv[3] ?? '/work/wt-agent-base';
const rate = Number(process.argv[4] ?? '600');
const entry = builtEntry(`${dir}/.bench-build/bench/serve.js`);
const redis = await startRedisServer();
const sim = await startTarget({ role: 'simulator' }, [], entry);
const gw = await startTarget({ role: 'gateway', redisUrl: redis.url, upstream: sim.url, namespace: 'rate', tracing: 'off' }, perf ? ['--perf-basic-prof'] : [], entry);
const floor = await startTarget({ role: 'floor', upstream: sim.url }, [], entry);
for (const body of ['small', 'agent'] as const) {
  for (const [name, t] of [['floor', floor], ['gateway', gw]] as const) {
    const key = name === 'gateway' ? gw.key : undefined;
    const shape = body === 'agent' ? agentShape(format, key) : requestShape(format, key);
    await throughput(t.url, shape, 20, 5, rate);
    const b = cpuTimes(t.pid);
    const rec = perf && name === 'gateway' ? spawn('perf', ['record', '-F', '999', '-g', '-p', String(t.pid), '-o', `${perf}.${body}`, '--', 'sleep', '5'], { stdio: 'ignore' }) : undefined;
    const r = await throughput(t.url, shape, 20, 5, rate);
    const a = cpuTimes(t.pid);
    if (rec) await new Promise((res) => rec.on('exit', res));
    console.log(body, name, r.requestsPerSec, 'req/s', 'user', ((a.user - b.user) / r.requests * 1e6).toFixed(0), 'sys', ((a.system - b.system) / r.requests * 1e6).toFixed(0), 'µs/req', r.non2xx);
  }
}
await gw.stop(); await floor.stop(); await sim.stop(); await redis.stop();
