// What the bench needs of a peer gateway: how to install or build it (cached between runs, in an
// ignored folder), how to start it against one upstream, and the request each format sends it.
import type { BenchFormat, RequestShape } from '../load.js';
import type { RunningPeer } from './process.js';

export type Installed = { ok: true; version: string } | { ok: false; reason: string };

export interface StartedPeer extends RunningPeer {
  /** The bench request as this peer takes it (its model names, its key header). */
  shape(format: BenchFormat, stream: boolean): RequestShape;
  /** Processes of the peer's own store (its PostgreSQL backends), measured in a column of their own. */
  storePids?: () => number[];
}

export interface PeerContext {
  /** The upstream it proxies to (the bench's simulator), an origin without a path. */
  upstream: string;
  /** A fresh PostgreSQL database of its own, for a peer that keeps its spend there. */
  newDatabase(): Promise<{ url: string; backendPids(): number[] }>;
  log(m: string): void;
}

export interface PeerSetup {
  /** For `--peers`: a word. */
  id: string;
  /** The row's name in the tables. */
  name: string;
  /** How it is configured, for the report's list of peers. */
  configuration: string;
  install(log: (m: string) => void): Promise<Installed>;
  start(ctx: PeerContext): Promise<StartedPeer>;
}

/** The bench's request with another model name and key header, for peers that route by their own names. */
export function withModel(shape: RequestShape, model: string, headers: Record<string, string>): RequestShape {
  const body = JSON.parse(shape.body) as { model: string };
  body.model = model;
  return { ...shape, headers: { ...shape.headers, ...headers }, body: JSON.stringify(body) };
}
