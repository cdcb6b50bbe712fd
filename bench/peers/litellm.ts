// LiteLLM's proxy (Python), installed by the bench from PyPI at a pinned version into an ignored virtual
// environment (bench/.litellm), run as its users run it: once with no database (a master key, models
// from a config file), and once with its PostgreSQL spend tracking and a virtual key with a budget.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../test/helpers/redis-server.js';
import { requestShape } from '../load.js';
import { BENCH_MODELS } from '../models.js';
import type { Installed, PeerContext, PeerSetup, StartedPeer } from './peer.js';
import { TARGET_NAMES } from '../report.js';
import { startPeerProcess, stepFailure } from './process.js';

export const LITELLM_VERSION = '1.108.10';
const DIR = new URL('../.litellm/', import.meta.url).pathname;
const VENV = join(DIR, 'venv');
const PYTHON = join(VENV, 'bin', 'python');
const MARKER = join(DIR, 'installed.json');
/** Its virtual keys are checked against this; the bench only uses it on loopback. */
const MASTER_KEY = 'sk-bench-litellm-master-0123456789abcdef';

const run = promisify(execFile);

/**
 * The proxy's own requirements, read from the wheel's metadata (its `proxy` extra), less
 * `litellm-enterprise`: the registry this bench runs against has no release of it at the version the
 * extra pins, and the proxy runs without it (enterprise features off, as in the open-source image).
 */
const PROXY_REQUIREMENTS = `
import importlib.metadata as m, re
for r in m.requires('litellm') or []:
    if re.search(r"extra\\s*==\\s*['\\"]proxy['\\"]", r) and not r.startswith('litellm-enterprise'):
        print(r.split(';')[0].strip())
`;

async function installLitellm(log: (m: string) => void): Promise<Installed> {
  if (existsSync(MARKER) && (JSON.parse(readFileSync(MARKER, 'utf8')) as { version?: string }).version === LITELLM_VERSION) {
    return { ok: true, version: LITELLM_VERSION };
  }
  mkdirSync(DIR, { recursive: true });
  log(`installing litellm ${LITELLM_VERSION} and its proxy's requirements into bench/.litellm (a few minutes the first time)`);
  try {
    if (!existsSync(PYTHON)) await run('python3', ['-m', 'venv', VENV], { timeout: 120_000 });
    const pip = [PYTHON, '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--retries', '1', '--timeout', '20'];
    await run(pip[0] as string, [...pip.slice(1), `litellm==${LITELLM_VERSION}`], { timeout: 600_000 });
    const { stdout } = await run(PYTHON, ['-c', PROXY_REQUIREMENTS], { timeout: 60_000 });
    const requirements = stdout.split('\n').filter((l) => l.trim() !== '');
    await run(pip[0] as string, [...pip.slice(1), ...requirements], { timeout: 900_000 });
  } catch (err) {
    return { ok: false, reason: `pip install litellm ${LITELLM_VERSION} failed: ${stepFailure(err, (l) => /error/i.test(l), 1)}` };
  }
  writeFileSync(MARKER, JSON.stringify({ version: LITELLM_VERSION }));
  return { ok: true, version: LITELLM_VERSION };
}

/**
 * Spend tracking needs Prisma's client generated against LiteLLM's schema; Prisma downloads its query
 * engine from binaries.prisma.sh the first time, so on a machine that cannot reach it this fails and the
 * row says so.
 */
async function installPrisma(log: (m: string) => void): Promise<Installed> {
  const base = await installLitellm(log);
  if (!base.ok) return base;
  const marker = join(DIR, 'prisma.json');
  if (existsSync(marker)) return base;
  try {
    await run(PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', 'prisma'], { timeout: 300_000 });
    const { stdout } = await run(PYTHON, ['-c', 'import litellm.proxy, os; print(os.path.dirname(litellm.proxy.__file__))'], { timeout: 60_000 });
    await run(join(VENV, 'bin', 'prisma'), ['generate', '--schema', join(stdout.trim(), 'schema.prisma')], { timeout: 300_000, env: { ...process.env, PATH: `${join(VENV, 'bin')}:${process.env.PATH ?? ''}` } });
  } catch (err) {
    return { ok: false, reason: `prisma generate (LiteLLM's database client) failed: ${stepFailure(err, (l) => /error/i.test(l), 1)}` };
  }
  writeFileSync(marker, '{}');
  return base;
}

function configYaml(upstream: string, databaseUrl: string | undefined): string {
  return [
    'model_list:',
    `  - model_name: ${BENCH_MODELS.openai}`,
    '    litellm_params:',
    `      model: openai/sim-${BENCH_MODELS.openai}`,
    `      api_base: ${upstream}/v1`,
    '      api_key: sk-simulator',
    `  - model_name: ${BENCH_MODELS.anthropic}`,
    '    litellm_params:',
    `      model: anthropic/sim-${BENCH_MODELS.anthropic}`,
    `      api_base: ${upstream}`,
    '      api_key: sk-simulator',
    'general_settings:',
    `  master_key: ${MASTER_KEY}`,
    ...(databaseUrl ? [`  database_url: ${JSON.stringify(databaseUrl)}`] : []),
    'litellm_settings:',
    '  telemetry: false',
    '',
  ].join('\n');
}

async function startLitellm(ctx: PeerContext, withDatabase: boolean): Promise<StartedPeer> {
  const db = withDatabase ? await ctx.newDatabase() : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'bench-litellm-'));
  writeFileSync(join(dir, 'config.yaml'), configYaml(ctx.upstream, db?.url));
  const port = await freePort();
  const running = await startPeerProcess({
    name: withDatabase ? 'litellm (PostgreSQL)' : 'litellm',
    command: join(VENV, 'bin', 'litellm'),
    args: ['--config', join(dir, 'config.yaml'), '--host', '127.0.0.1', '--port', String(port), '--num_workers', '1'],
    cwd: dir,
    env: { ...process.env, LITELLM_LOG: 'ERROR', ...(db ? { DATABASE_URL: db.url } : {}), PATH: `${join(VENV, 'bin')}:${process.env.PATH ?? ''}` },
    url: `http://127.0.0.1:${port}`,
    readyPath: '/health/liveliness',
    // The proxy imports a great deal before it listens: about 50 s on a busy two-core machine.
    readySec: 180,
  });
  let key = MASTER_KEY;
  if (db) {
    // A virtual key with a budget, as a reseller gives its customers: each request is checked against it
    // and its spend written to PostgreSQL.
    const res = await fetch(`${running.url}/key/generate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${MASTER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ max_budget: 1_000_000, models: [BENCH_MODELS.openai, BENCH_MODELS.anthropic] }),
    });
    const body = (await res.json()) as { key?: string };
    if (!res.ok || typeof body.key !== 'string') {
      running.kill();
      throw new Error(`litellm /key/generate answered ${res.status}`);
    }
    key = body.key;
  }
  return {
    ...running,
    shape: (format, stream) => requestShape(format, key, stream),
    ...(db ? { storePids: db.backendPids } : {}),
  };
}

export const litellm: PeerSetup = {
  id: 'litellm',
  name: TARGET_NAMES.litellm,
  configuration: `litellm[proxy] ${LITELLM_VERSION} from PyPI (less litellm-enterprise), one worker, master key, models from a config file, no database`,
  install: installLitellm,
  start: (ctx) => startLitellm(ctx, false),
};

export const litellmWithDatabase: PeerSetup = {
  id: 'litellm-pg',
  name: TARGET_NAMES.litellmRecorded,
  configuration: `the same with DATABASE_URL (its spend tracking) and a virtual key with a budget`,
  install: installPrisma,
  start: (ctx) => startLitellm(ctx, true),
};
