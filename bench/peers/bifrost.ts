// Bifrost's HTTP gateway (Go), built by the bench from its public source at a pinned commit into an
// ignored folder (bench/.bifrost), run without governance and with its governance plugin (a virtual key
// with a budget, kept in its SQLite config store). Its code is never committed here.
//
// Where the source comes from: the Go module proxy refuses github.com/maximhq/bifrost's modules (403 for
// core and transports), and GitHub itself is out of reach of these machines, so the bench builds from a
// git directory that holds the pinned commit: TOLLGATE_BENCH_BIFROST_GIT, or a mirror of the repository
// beside the project (../.mirror/*bifrost*/repo). Its third-party modules come from the module proxy.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../test/helpers/redis-server.js';
import { requestShape, type BenchFormat } from '../load.js';
import { BENCH_MODELS } from '../models.js';
import { withModel, type Installed, type PeerContext, type PeerSetup, type StartedPeer } from './peer.js';
import { TARGET_NAMES } from '../report.js';
import { startPeerProcess, stepFailure, type RunningPeer } from './process.js';

/** transports v1.3.13 with core v1.2.16 (31 October 2025). */
export const BIFROST_COMMIT = 'e4c45fabed7ac9d3c216cc4f6e42cad16058f712';
const VERSION = 'transports v1.3.13';
const DIR = new URL('../.bifrost/', import.meta.url).pathname;
const BINARY = join(DIR, `bifrost-http-${BIFROST_COMMIT.slice(0, 12)}`);
const MODULES = ['core', 'framework', 'plugins/governance', 'plugins/jsonparser', 'plugins/logging', 'plugins/maxim', 'plugins/mocker', 'plugins/otel', 'plugins/semanticcache', 'plugins/telemetry'];

const run = promisify(execFile);

function sourceCandidates(): string[] {
  const fromEnv = process.env.TOLLGATE_BENCH_BIFROST_GIT;
  const mirrors = new URL('../../../.mirror/', import.meta.url).pathname;
  const beside = existsSync(mirrors)
    ? readdirSync(mirrors)
        .filter((d) => /bifrost/i.test(d))
        .map((d) => join(mirrors, d, 'repo'))
    : [];
  return [...(fromEnv ? [fromEnv] : []), ...beside];
}

async function holdsCommit(gitDir: string): Promise<boolean> {
  try {
    await run('git', ['--git-dir', gitDir, 'cat-file', '-e', `${BIFROST_COMMIT}^{commit}`], { timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}

async function buildBifrost(log: (m: string) => void): Promise<Installed> {
  if (existsSync(BINARY)) return { ok: true, version: VERSION };
  let gitDir: string | undefined;
  for (const c of sourceCandidates()) if (await holdsCommit(c)) gitDir = c;
  if (!gitDir) {
    return {
      ok: false,
      reason: `no source of github.com/maximhq/bifrost at ${BIFROST_COMMIT.slice(0, 12)}: the Go module proxy refuses its modules; set TOLLGATE_BENCH_BIFROST_GIT to a clone that holds the commit`,
    };
  }
  const src = join(DIR, 'src');
  rmSync(src, { recursive: true, force: true });
  mkdirSync(src, { recursive: true });
  log(`building Bifrost ${VERSION} (${BIFROST_COMMIT.slice(0, 12)}) into bench/.bifrost (a few minutes the first time)`);
  const env = { ...process.env, GOWORK: 'off', GOFLAGS: '-mod=mod' };
  const transports = join(src, 'transports');
  try {
    await run('bash', ['-c', `git --git-dir="$1" archive "$2" core framework plugins transports | tar -x -C "$3"`, 'archive', gitDir, BIFROST_COMMIT, src], { timeout: 120_000 });
    // Its modules require each other by version; these point them at the same commit's folders.
    for (const m of MODULES) await run('go', ['mod', 'edit', '-replace', `github.com/maximhq/bifrost/${m}=../${m}`], { cwd: transports, env });
    // sonic v1.14.0, which the commit pins, does not build on Go 1.26; v1.15.1 is the release Bifrost moved to.
    await run('go', ['get', 'github.com/bytedance/sonic@v1.15.1'], { cwd: transports, env, timeout: 600_000 });
    // The web UI is built by npm in their pipeline and embedded; the bench serves no UI.
    mkdirSync(join(transports, 'bifrost-http', 'ui'), { recursive: true });
    writeFileSync(join(transports, 'bifrost-http', 'ui', 'index.html'), '<!doctype html><title>Bifrost</title>\n');
    await run('go', ['build', '-o', BINARY, './bifrost-http'], { cwd: transports, env, timeout: 1_200_000 });
  } catch (err) {
    return { ok: false, reason: `building Bifrost failed: ${stepFailure(err, (l) => !l.startsWith('go: downloading'))}` };
  }
  return { ok: true, version: VERSION };
}

/**
 * Bifrost downloads model prices from getbifrost.ai at start and will not start without them; this
 * serves the two simulator models' prices on loopback instead (OpenAI's list prices; only the budget's
 * arithmetic uses them).
 */
async function servePrices(): Promise<{ url: string; server: Server }> {
  const entry = (provider: string) => ({ input_cost_per_token: 0.000003, output_cost_per_token: 0.000015, provider, mode: 'chat' });
  const body = JSON.stringify({ [`openai/sim-${BENCH_MODELS.openai}`]: entry('openai'), [`anthropic/sim-${BENCH_MODELS.anthropic}`]: entry('anthropic') });
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the price server has no port');
  return { url: `http://127.0.0.1:${address.port}/pricing.json`, server };
}

function configJson(upstream: string, pricesUrl: string, governance: boolean, appDir: string): string {
  const provider = (name: string) => ({
    keys: [{ name: `${name}-simulator`, value: 'sk-simulator', models: [], weight: 1 }],
    network_config: { base_url: upstream },
    // Its defaults are far below the bench's 50 connections; queue rather than drop.
    concurrency_and_buffer_size: { concurrency: 100, buffer_size: 1000 },
  });
  return JSON.stringify({
    client: { drop_excess_requests: false, initial_pool_size: 300, enable_logging: false, enable_governance: governance, enforce_governance_header: governance, allow_direct_keys: false },
    providers: { openai: provider('openai'), anthropic: provider('anthropic') },
    framework: { pricing: { pricing_url: pricesUrl, pricing_sync_interval: 86_400 } },
    ...(governance ? { config_store: { enabled: true, type: 'sqlite', config: { path: join(appDir, 'config.db') } } } : {}),
  });
}

async function launch(name: string, appDir: string): Promise<RunningPeer> {
  const port = await freePort();
  return startPeerProcess({
    name,
    command: BINARY,
    args: ['-app-dir', appDir, '-host', '127.0.0.1', '-port', String(port), '-log-level', 'error'],
    cwd: appDir,
    env: process.env,
    url: `http://127.0.0.1:${port}`,
    readyPath: '/health',
    readySec: 60,
  });
}

/**
 * With a config store, Bifrost reads the price list's address from the store, not from config.json, so
 * the first start creates the store and stops for want of prices; the bench writes the address into
 * the store (SQLite, through Python's sqlite3) and starts it again.
 */
async function seedPriceAddress(appDir: string, pricesUrl: string): Promise<void> {
  const script = `import sqlite3,sys
c=sqlite3.connect(sys.argv[1]); c.execute('delete from framework_configs'); c.execute('insert into framework_configs(pricing_url,pricing_sync_interval) values(?,?)',(sys.argv[2],86400)); c.commit()`;
  await run('python3', ['-c', script, join(appDir, 'config.db'), pricesUrl], { timeout: 30_000 });
}

async function startBifrost(ctx: PeerContext, governance: boolean): Promise<StartedPeer> {
  const name = governance ? 'bifrost + governance' : 'bifrost';
  const prices = await servePrices();
  const appDir = mkdtempSync(join(tmpdir(), 'bench-bifrost-'));
  writeFileSync(join(appDir, 'config.json'), configJson(ctx.upstream, prices.url, governance, appDir));
  let running: RunningPeer;
  try {
    if (governance) {
      await launch(name, appDir).then(
        (first) => first.stop(),
        () => undefined, // expected: it stops without prices once it has made the store
      );
      await seedPriceAddress(appDir, prices.url);
    }
    running = await launch(name, appDir);
  } catch (err) {
    prices.server.close();
    throw err;
  }
  let headers: Record<string, string> = {};
  if (governance) {
    const res = await fetch(`${running.url}/api/governance/virtual-keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench', budget: { max_limit: 1_000_000, reset_duration: '1M' } }),
    });
    const body = (await res.json()) as { virtual_key?: { value?: string } };
    const key = body.virtual_key?.value;
    if (!res.ok || typeof key !== 'string') {
      running.kill();
      prices.server.close();
      throw new Error(`bifrost refused the virtual key: HTTP ${res.status}`);
    }
    headers = { 'x-bf-vk': key };
  }
  const shape = (format: BenchFormat, stream: boolean) => {
    const base = requestShape(format, undefined, stream);
    const routed = withModel(base, `${format}/sim-${BENCH_MODELS[format]}`, headers);
    // Bifrost serves Anthropic's wire format under /anthropic.
    return format === 'anthropic' ? { ...routed, path: `/anthropic${routed.path}` } : routed;
  };
  return {
    ...running,
    shape,
    stop: async () => {
      await running.stop();
      prices.server.close();
    },
    kill: () => {
      running.kill();
      prices.server.close();
    },
  };
}

export const bifrost: PeerSetup = {
  id: 'bifrost',
  name: TARGET_NAMES.bifrost,
  configuration: `Bifrost ${VERSION} (${BIFROST_COMMIT.slice(0, 12)}), built with the machine's Go (sonic raised to v1.15.1 to build on Go 1.26), logging off, governance off, 100 concurrent requests per provider`,
  install: buildBifrost,
  start: (ctx) => startBifrost(ctx, false),
};

export const bifrostWithGovernance: PeerSetup = {
  id: 'bifrost-governance',
  name: TARGET_NAMES.bifrostGoverned,
  configuration: 'the same with its governance plugin enforcing a virtual key (x-bf-vk) with a budget, kept in its SQLite config store',
  install: buildBifrost,
  start: (ctx) => startBifrost(ctx, true),
};
