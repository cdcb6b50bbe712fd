// The model ids the bench's gateway serves and its load sends. Kept apart from serve.ts, which starts a
// gateway when imported: the load generator importing it ran an idle gateway of its own (with a Redis
// client of its own that kept the bench from exiting).

/** Model ids the bench sends: one per upstream wire format, so each format is a pass-through. */
export const BENCH_MODELS = { openai: 'bench-openai', anthropic: 'bench-anthropic' } as const;

/** The memory benchmark's model routed to the i-th simulator origin. */
export const memoryModel = (i: number): string => `bench-mem-${i}`;
