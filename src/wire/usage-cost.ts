// The cost of a request in its answer's usage object, as OpenRouter reports it: `usage.cost`, a number of
// USD. Every client format (chat completions, messages, Responses) puts it in the same place, added to a
// usage object its encoder already built, so the encoders themselves stay as they are.
import type { JsonObject } from './json-shape.js';

/** `usage` with its `cost` (USD) set; unchanged when the cost is not known (the upstream reported no usage). */
export function withCost(usage: JsonObject, costUsd: number | undefined): JsonObject {
  if (costUsd !== undefined) usage.cost = costUsd;
  return usage;
}
