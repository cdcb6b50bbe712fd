// Each pass the gateway makes over a request body, timed in-process on the format's agent-shaped body
// (bench/load.ts), beside the floor's own (parse, stringify, encode): CPU µs a call, 2,000 calls after
// 300 to warm up. `npx tsx bench/body-passes.ts [openai|anthropic]`.
import { agentShape, type BenchFormat } from './load.js';
import type { CatalogModel } from '../src/catalog/snapshot.js';
import { JsonDepthGauge } from '../src/decode/json-body.js';
import { decodeChatRequest } from '../src/decode/chat-request.js';
import { decodeMessagesRequest } from '../src/decode/messages-request.js';
import { chatCompletionPlan } from '../src/http/routes/chat-completions.js';
import { messagesPlan } from '../src/http/routes/messages.js';
import { editTopLevel } from '../src/translate/body-edit.js';

const format = (process.argv[2] ?? 'openai') as BenchFormat;
const bytes = Buffer.from(agentShape(format, undefined).body);
// As a socket delivers it: 64 KB reads.
const chunks: Buffer[] = [];
for (let at = 0; at < bytes.length; at += 65_536) chunks.push(bytes.subarray(at, at + 65_536));
const CALLS = 2000;
function time(name: string, f: () => unknown): void {
  for (let i = 0; i < 300; i++) f();
  const t0 = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) f();
  const used = process.cpuUsage(t0);
  process.stdout.write(`${name.padEnd(34)} ${((used.user + used.system) / CALLS).toFixed(1).padStart(7)} µs\n`);
}
const model = {
  id: 'm', displayName: 'M', kind: 'Abliterated', contextWindow: 200_000, contextDisplay: '200K',
  pricing: { input: 1_000_000, output: 4_000_000, display: { input: '', output: '' } },
  supportsTools: true, supportsVision: true, supportsReasoning: false, abliterated: false,
  defaultMaxOutputTokens: 4096, aliases: [], created: 0, source: 'bench',
  upstreams: [{ name: 'u', format, upstreamModel: 'sim-m' }],
} as unknown as CatalogModel;

process.stdout.write(`${format}, ${bytes.length} bytes in ${chunks.length} chunks\n`);
time('gateway: nesting gauge', () => {
  const g = new JsonDepthGauge(128);
  for (const c of chunks) g.feed(c);
  return g;
});
time('both: Buffer.concat of the chunks', () => Buffer.concat(chunks, bytes.length));
time('both: toString + JSON.parse', () => JSON.parse(bytes.toString('utf8')) as unknown);
const parsed = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
time('floor: JSON.stringify + Buffer.from', () => Buffer.from(JSON.stringify(parsed)));
const gauge = new JsonDepthGauge(128);
for (const c of chunks) gauge.feed(c);
const clientBody = { bytes, members: gauge.members };
if (format === 'openai') {
  time('gateway: decode', () => decodeChatRequest(parsed));
  const decoded = decodeChatRequest(parsed);
  time('gateway: plan (edit, footprint)', () => chatCompletionPlan(decoded, model, 'r', clientBody));
} else {
  time('gateway: decode', () => decodeMessagesRequest(parsed, { requireMaxTokens: true }));
  const decoded = decodeMessagesRequest(parsed, { requireMaxTokens: true });
  time('gateway: plan (edit, footprint)', () => messagesPlan(decoded, model, 'r', {}, clientBody));
}
time('gateway: the edit alone', () => editTopLevel(clientBody, { model: 'sim-m', max_tokens: 64 }));
