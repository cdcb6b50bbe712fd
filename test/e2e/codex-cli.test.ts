// The real Codex CLI (@openai/codex 0.169 from npm) against the local run, in a network namespace of its
// own with only loopback (`unshare --net`): Codex sends its default request (tools including web_search,
// reasoning, store false, encrypted reasoning asked for) to /v1/responses through a custom model
// provider; the model (the simulator, scripted) calls Codex's shell tool, Codex runs the command, sends
// the output back, and the answer quotes it. Both turns are charged exactly their usage, and their
// tokens add up to what Codex reports. Fails loudly where namespaces cannot be made (CI runs as root).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { costMicros } from '../../src/billing/money.js';
import { usdPerMillionToMicros } from '../../src/catalog/price.js';
import { EXAMPLE_MODELS } from '../helpers/gateway-harness.js';

const ROOT = join(import.meta.dirname, '..', '..');
const pricing = EXAMPLE_MODELS.find((m) => m.id === 'outlaw-1-xploded')?.pricing;
const prices = { input: usdPerMillionToMicros(pricing?.input ?? '0'), output: usdPerMillionToMicros(pricing?.output ?? '0'), display: { input: '', output: '' } };

interface Run {
  exitCode: number | null;
  events: string[];
  stderr: string;
  usage: Array<{ usage: { input: number; output: number; cachedInput: number; reasoning: number }; cost: number; status: string }>;
}

function runInNamespace(): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn('unshare', ['--net', '--', 'sh', '-c', `ip link set lo up && exec ${process.execPath} --import tsx test/helpers/codex-netns-run.ts`], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const line = out.trim().split('\n').pop() ?? '';
      if (code !== 0 || !line.startsWith('{')) reject(new Error(`the namespace run failed (${String(code)}): ${err.slice(-2000)} ${out.slice(-1000)}`));
      else resolve(JSON.parse(line) as Run);
    });
  });
}

describe('Codex CLI through the Responses API', () => {
  it('calls its shell tool, answers with the output, and every turn is charged exactly', async () => {
    const run = await runInNamespace();
    expect(run.exitCode, run.stderr).toBe(0);
    const events = run.events.map((l) => JSON.parse(l) as { type: string; item?: { type: string; command?: string; aggregated_output?: string; exit_code?: number; text?: string }; usage?: { input_tokens: number; output_tokens: number } });
    const command = events.find((e) => e.type === 'item.completed' && e.item?.type === 'command_execution')?.item;
    expect(command?.exit_code).toBe(0);
    expect(command?.aggregated_output).toContain('TOLLGATE_CODEX_OK_42');
    const answer = events.filter((e) => e.type === 'item.completed' && e.item?.type === 'agent_message').pop()?.item?.text ?? '';
    expect(answer).toContain('TOLLGATE_CODEX_OK_42');
    const turn = events.find((e) => e.type === 'turn.completed')?.usage;
    // Two model requests: the tool call, then the answer; no failed or retried turn.
    expect(run.usage.map((u) => u.status)).toEqual(['completed', 'completed']);
    expect(run.usage.reduce((t, u) => t + u.usage.input, 0)).toBe(turn?.input_tokens);
    expect(run.usage.reduce((t, u) => t + u.usage.output, 0)).toBe(turn?.output_tokens);
    for (const u of run.usage) expect(u.cost).toBe(costMicros(u.usage, prices));
  }, 150_000);
});
