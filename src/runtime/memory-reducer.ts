// Gives back, when the gateway has gone idle, the heap pages its start or a burst of load grew. V8's
// own memory reducer is meant to do this once a process stops allocating, but on Node 24.21 it never
// starts: it reads the embedder heap's allocation rate as zero, and a rate of zero counts as not low
// (`--trace-memory-reducer` answers "high alloc" at every check; docs/performance.md, "Lever 4"). An
// idle gateway then holds about 35 MB of young-generation pages with nothing in them. This makes the
// same decision from what Node can see: the event loop idle for a whole interval, and the process
// grown since the last reduction. Under load it never runs, so it costs the load nothing.
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export interface MemoryReducerPolicy {
  /** Busy share of the event loop over an interval below which the interval counts as idle. */
  idleUtilization: number;
  /** Growth of the resident set since the last reduction (bytes) that makes another worth its pause. */
  minGrowthBytes: number;
}

/**
 * An idle gateway's loop is busy well under 0.5% (timers: the key sweeper, the reaper); 1% is about
 * 20 small requests a second. 16 MB is one semi-space of the image's young generation.
 */
export const MEMORY_REDUCER_POLICY: MemoryReducerPolicy = { idleUtilization: 0.01, minGrowthBytes: 16 * 1024 * 1024 };

/** What one reduction did, for the log. */
export interface Reduction {
  rssBeforeBytes: number;
  rssAfterBytes: number;
  pauseMs: number;
}

/** The decision, apart from clocks and V8, so it can be driven interval by interval. */
export class MemoryReducer {
  /** 0 at the start: what the start grew is the first thing to give back. */
  private rssAfterLast = 0;

  constructor(
    private readonly policy: MemoryReducerPolicy,
    private readonly collect: () => void,
    private readonly rss: () => number = () => process.memoryUsage.rss(),
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Called once an interval with that interval's loop utilization; a reduction when it ran one. */
  check(utilization: number): Reduction | undefined {
    if (utilization >= this.policy.idleUtilization) return undefined;
    const rssBeforeBytes = this.rss();
    if (rssBeforeBytes - this.rssAfterLast < this.policy.minGrowthBytes) return undefined;
    const started = this.now();
    this.collect();
    const pauseMs = this.now() - started;
    this.rssAfterLast = this.rss();
    return { rssBeforeBytes, rssAfterBytes: this.rssAfterLast, pauseMs };
  }
}

type CollectGarbage = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * V8's collection that gives memory back (the one it runs before giving up on an allocation: full
 * collections, then its pooled pages released to the system). It holds the loop for a moment, which
 * is why it runs only when the loop has nothing else to do. Node has no API for it: `--expose-gc`,
 * set now, exposes `gc` to a new context only (the way Jest reads heap use), and is turned off again.
 */
export function collectAndReleaseMemory(): void {
  setFlagsFromString('--expose-gc');
  try {
    (runInNewContext('gc') as CollectGarbage)({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}

/** Checks every `intervalMs` (V8's reducer checks every 8 s); the timer does not hold the process open. */
export function startMemoryReducer(intervalMs: number, onReduced: (r: Reduction) => void, policy: MemoryReducerPolicy = MEMORY_REDUCER_POLICY): { stop(): void } {
  const reducer = new MemoryReducer(policy, collectAndReleaseMemory);
  let last = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const reduction = reducer.check(performance.eventLoopUtilization(now, last).utilization);
    // The reduction's own pause is not the next interval's work.
    last = performance.eventLoopUtilization();
    if (reduction !== undefined) onReduced(reduction);
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
