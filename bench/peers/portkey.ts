// Portkey's open-source gateway, installed on demand from the npm registry into bench/.peer (ignored by
// git) at a pinned version, run in its own process on a loopback port and pointed at the simulator per
// request (provider and custom host headers), so it proxies exactly what the others do.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { freePort } from '../../test/helpers/redis-server.js';
import type { Installed, PeerSetup } from './peer.js';
import { TARGET_NAMES } from '../report.js';
import { startPeerProcess } from './process.js';
import { directShape, requestShape, type BenchFormat, type RequestShape } from '../load.js';

const PEER_PACKAGE = '@portkey-ai/gateway';
/** The version the issue measured. */
const PEER_VERSION = '1.15.2';
/** Its streaming breaks with newer releases of these; pinned as npm overrides. */
const OVERRIDES = { '@hono/node-server': '1.13.5', hono: '4.9.7' } as const;

const DIR = new URL('../.peer/', import.meta.url).pathname;
const ENTRY = `${DIR}node_modules/${PEER_PACKAGE}/build/start-server.js`;

const run = promisify(execFile);

function installedVersion(pkg: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(`${DIR}node_modules/${pkg}/package.json`, 'utf8')) as { version?: string }).version;
  } catch {
    return undefined;
  }
}

/** Installs the peer unless the pinned versions are already there; the reason when it cannot. */
async function installPortkey(log: (m: string) => void): Promise<Installed> {
  const pinned = (): boolean =>
    installedVersion(PEER_PACKAGE) === PEER_VERSION && Object.entries(OVERRIDES).every(([p, v]) => installedVersion(p) === v);
  if (pinned() && existsSync(ENTRY)) return { ok: true, version: PEER_VERSION };
  mkdirSync(DIR, { recursive: true });
  const manifest = { name: 'tollgate-bench-peer', private: true, dependencies: { [PEER_PACKAGE]: PEER_VERSION }, overrides: OVERRIDES };
  writeFileSync(`${DIR}package.json`, `${JSON.stringify(manifest, null, 2)}\n`);
  log(`installing ${PEER_PACKAGE}@${PEER_VERSION} into bench/.peer`);
  try {
    // Few retries and a hard timeout: without a network this must fail in seconds, not minutes.
    await run('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--fetch-retries=1', '--fetch-timeout=15000'], {
      cwd: DIR,
      timeout: 60_000,
    });
  } catch (err) {
    const e = err as { stderr?: string; killed?: boolean; message: string };
    const lines = (e.stderr ?? e.message)
      .split('\n')
      .filter((l) => /^npm (error|ERR!) /.test(l) && !/A complete log|debug-0\.log/.test(l))
      .map((l) => l.replace(/^npm (error|ERR!) /, ''));
    const why = e.killed ? 'timed out after 60 s' : lines.slice(0, 4).join('; ') || e.message.split('\n')[0];
    return { ok: false, reason: `npm install ${PEER_PACKAGE}@${PEER_VERSION} failed: ${why}` };
  }
  return pinned() ? { ok: true, version: PEER_VERSION } : { ok: false, reason: `npm installed other versions than ${PEER_VERSION} with the pinned overrides` };
}

/**
 * Portkey's server listens on every interface and takes no host option; this preload makes a listen
 * without a host bind to loopback, so the benchmark exposes nothing.
 */
const LOOPBACK_PRELOAD = `data:text/javascript,${encodeURIComponent(`
import net from 'node:net';
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && (args[1] === undefined || typeof args[1] === 'function')) args[1] = '127.0.0.1';
  return listen.apply(this, args);
};
`)}`;

/**
 * The bench request as Portkey takes it: the provider of the format and the simulator as its custom
 * host (both formats' base URL is `<origin>/v1` for Portkey), with the simulator's model name since
 * Portkey forwards the model as given.
 */
function portkeyShape(format: BenchFormat, simulatorUrl: string, stream: boolean): RequestShape {
  const shape = directShape(requestShape(format, 'sk-bench-peer', stream));
  return {
    ...shape,
    headers: { ...shape.headers, 'x-portkey-provider': format, 'x-portkey-custom-host': `${simulatorUrl}/v1` },
  };
}

export const portkey: PeerSetup = {
  id: 'portkey',
  name: TARGET_NAMES.portkey,
  configuration: `${PEER_PACKAGE}@${PEER_VERSION} from npm (overrides @hono/node-server 1.13.5, hono 4.9.7), NODE_ENV=production, headless; no budget (it keeps none without its hosted control plane)`,
  install: installPortkey,
  async start(ctx) {
    const port = await freePort();
    const running = await startPeerProcess({
      name: TARGET_NAMES.portkey,
      command: process.execPath,
      args: ['--import', LOOPBACK_PRELOAD, ENTRY, `--port=${port}`, '--headless'],
      cwd: DIR,
      // production: no request log UI or log stream, as a deployment would run it.
      env: { ...process.env, NODE_ENV: 'production' },
      url: `http://127.0.0.1:${port}`,
      readyPath: '/',
      readySec: 30,
    });
    return { ...running, shape: (format, stream) => portkeyShape(format, ctx.upstream, stream) };
  },
};
