// Run inside a loopback-only network namespace (test/e2e/codex-cli.test.ts starts it with
// `unshare --net`): the local run (`src/local-main.ts`, as `npm start` runs it) with its simulator scripted to
// call Codex's shell tool, then the real Codex CLI (`codex exec`, from npm) against it as a custom model
// provider speaking the Responses API. Prints one JSON line: Codex's exit code, its JSONL events, and
// the demo account's usage records from the admin API.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');
const PORT = 18080;
const ADMIN_PORT = 18081;
const ADMIN_TOKEN = 'codex-test-admin-token';
/** What the command prints is computed when it runs: it appears nowhere in the prompt or the arguments. */
const COMMAND = 'echo TOLLGATE_CODEX_OK_$((6 * 7))';

const dataDir = mkdtempSync(join(tmpdir(), 'tg-codex-'));
const env: NodeJS.ProcessEnv = {
  ...process.env,
  PORT: String(PORT),
  ADMIN_PORT: String(ADMIN_PORT),
  METRICS_PORT: '0',
  SIM_PORT: '0',
  DASHBOARD_PORT: '0',
  TOLLGATE_DATA_DIR: dataDir,
  TOLLGATE_PAYMENTS: 'off',
  TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
  SIM_TOOL_SCRIPT: JSON.stringify({ tool: 'exec_command', arguments: { cmd: COMMAND } }),
};
for (const name of ['DATABASE_URL', 'REDIS_URL', 'REDIS_CLUSTER_NODES', 'TOLLGATE_DEMO_KEY', 'TOLLGATE_SIMULATOR_URL']) delete env[name];

const local = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'local-main.ts')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
let banner = '';
let localErr = '';
local.stderr.on('data', (d: Buffer) => (localErr += d.toString()));
const started = await new Promise<{ key: string; account: string }>((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`the local run did not start: ${banner} ${localErr}`)), 30_000);
  local.on('exit', (code) => reject(new Error(`the local run exited ${String(code)}: ${localErr}`)));
  local.stdout.on('data', (d: Buffer) => {
    banner += d.toString();
    const key = /API key: (\S+)/.exec(banner)?.[1];
    const account = /Demo account (\S+),/.exec(banner)?.[1];
    if (key !== undefined && account !== undefined && banner.includes('Top-ups:')) {
      clearTimeout(timer);
      resolve({ key, account });
    }
  });
});

const codexHome = mkdtempSync(join(tmpdir(), 'codex-home-'));
writeFileSync(
  join(codexHome, 'config.toml'),
  `model = "outlaw-1-xploded"
model_provider = "tollgate"

[model_providers.tollgate]
name = "Tollgate"
base_url = "http://127.0.0.1:${PORT}/v1"
env_key = "TOLLGATE_API_KEY"
wire_api = "responses"
`,
);
const workDir = mkdtempSync(join(tmpdir(), 'codex-work-'));
const codex = spawn(
  process.execPath,
  [join(ROOT, 'node_modules', '@openai', 'codex', 'bin', 'codex.js'), 'exec', '--skip-git-repo-check', '--json', '--dangerously-bypass-approvals-and-sandbox', 'Run the shell command that prints the check word, then tell me exactly what it printed.'],
  { cwd: workDir, env: { ...process.env, CODEX_HOME: codexHome, TOLLGATE_API_KEY: started.key }, stdio: ['ignore', 'pipe', 'pipe'] },
);
let out = '';
let err = '';
codex.stdout.on('data', (d: Buffer) => (out += d.toString()));
codex.stderr.on('data', (d: Buffer) => (err += d.toString()));
const exitCode = await new Promise<number | null>((resolve) => {
  const timer = setTimeout(() => codex.kill('SIGKILL'), 90_000);
  codex.on('exit', (code) => {
    clearTimeout(timer);
    resolve(code);
  });
});

// The settlements land a moment after the answers; the usage listing reads the record.
let usage: unknown[] = [];
for (let i = 0; i < 50; i++) {
  const res = await fetch(`http://127.0.0.1:${ADMIN_PORT}/admin/accounts/${started.account}/usage`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  usage = ((await res.json()) as { usage: unknown[] }).usage;
  if (usage.length >= 2) break;
  await new Promise((r) => setTimeout(r, 100));
}
local.kill('SIGTERM');
process.stdout.write(`${JSON.stringify({ exitCode, events: out.split('\n').filter((l) => l.startsWith('{')), stderr: err.slice(-2000), usage })}\n`);
process.exit(0);
