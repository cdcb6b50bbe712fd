// V8 CPU profiles as the bench reads them (bench:profile's file, bench:journal's per-round profiles).

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

export interface CpuProfile {
  /** µs on the monotonic clock (process.hrtime's), when profiling started. */
  startTime: number;
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** A function's name, file (from node_modules/, src/ or bench/) and line: the key self time is summed by. */
export function siteOf(n: ProfileNode): string {
  const where = n.callFrame.url.replace(/^.*\/(node_modules\/|src\/|bench\/)/, '$1');
  return `${n.callFrame.functionName || '(anonymous)'} ${where}:${n.callFrame.lineNumber + 1}`;
}
