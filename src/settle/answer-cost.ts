// The charge of a whole (non-stream) answer, in the answer: a header, and `usage.cost` in its body. A
// stream's headers leave before its usage is known; its final usage event carries the cost instead
// (each relay or encoder writes it there).
import type { Micros } from '../catalog/snapshot.js';
import { formatUsd } from '../billing/money.js';
import { usdNumber } from '../billing/answer-cost.js';
import type { GatewayContext } from '../request/state.js';
import type { JsonObject } from '../wire/json-shape.js';
import { withCost } from '../wire/usage-cost.js';

/** The header a whole answer's charge is sent in, as a decimal of USD with six places ("0.001234"). */
export const COST_HEADER = 'x-tollgate-cost-usd';

/** Writes `charged` (micro-USD) into the answer about to be sent: the header, and its body's usage if it has one. */
export function stampAnswerCost(ctx: GatewayContext, answerUsage: JsonObject | undefined, charged: Micros): void {
  if (ctx.res.headersSent) return;
  ctx.set(COST_HEADER, formatUsd(charged));
  if (answerUsage !== undefined) withCost(answerUsage, usdNumber(charged));
}
