// A cost ceiling per request: the most one request may cost, from the client's header or the key's
// default (the lower of the two, so a client cannot raise its key's ceiling). The worst case is
// computed as for every reservation (worst-case.ts); when it is above the ceiling, the output limit is
// lowered to the largest that fits, which is then the limit every upstream is sent and the one the hold
// covers, so the charge (min(actual, hold)) never exceeds the ceiling. When not even the prompt with the
// smallest output fits, the request is refused before anything is held or sent.
//
// Lowering the limit only shortens the upstream bodies (the limit has fewer digits, or a thinking budget
// sized to it shrinks or goes), so the input bound measured at the requested limit still bounds them.
import type { CatalogModel, Micros } from '../catalog/snapshot.js';
import { formatUsd } from '../billing/money.js';
import { GatewayError } from '../request/gateway-error.js';
import { largestAffordableMaxTokens, worstCase, type RequestFootprint, type WorstCase } from './worst-case.js';

/** The request header that sets a ceiling, in decimal USD (`0.05`). */
export const COST_CEILING_HEADER = 'x-tollgate-max-cost-usd';
/** The response header that names the output limit sent upstream while a ceiling applies. */
export const OUTPUT_LIMIT_HEADER = 'x-tollgate-max-tokens';
/** The highest ceiling taken: 1,000,000 USD, far above any request's worst case. */
export const MAX_COST_CEILING: Micros = 1_000_000_000_000;
/** Decimals of a USD amount the ledger keeps (micro-USD). */
const USD_DECIMALS = 6;

/** The ceiling in force for a request, and who set it (named in a refusal). */
export interface CostCeiling {
  amount: Micros;
  setBy: 'header' | 'key';
}

function invalidHeader(problem: string): GatewayError {
  return new GatewayError(400, `The ${COST_CEILING_HEADER} header ${problem}; give the most this request may cost as a decimal amount of USD, like 0.05.`, {
    code: 'invalid_cost_ceiling',
  });
}

/**
 * The header's value as micro-USD, exactly (digits, never a float); undefined when the header is absent.
 * Throws a 400 for a value that is not one non-negative decimal amount with at most six decimals, or is
 * above MAX_COST_CEILING.
 */
export function parseCostCeilingHeader(value: string | string[] | undefined): Micros | undefined {
  if (value === undefined) return undefined;
  // Node joins a repeated header with ", ": two ceilings are not one.
  const text = (Array.isArray(value) ? value.join(', ') : value).trim();
  if (text.startsWith('-')) throw invalidHeader(`must not be negative (got ${text.slice(0, 40)})`);
  const parts = /^(\d+)(?:\.(\d+))?$/.exec(text);
  if (parts === null) throw invalidHeader(text === '' ? 'is empty' : `is not a decimal amount of USD (got ${JSON.stringify(text.slice(0, 40))})`);
  const [, whole = '0', fraction = ''] = parts;
  if (fraction.length > USD_DECIMALS) throw invalidHeader(`has more than ${USD_DECIMALS} decimals (the ledger counts micro-USD)`);
  const micros = BigInt(whole) * 1_000_000n + BigInt(fraction.padEnd(USD_DECIMALS, '0'));
  if (micros > BigInt(MAX_COST_CEILING)) throw invalidHeader(`is above the largest ceiling taken, ${formatUsd(MAX_COST_CEILING)} USD`);
  return Number(micros);
}

/** The lower of the header's ceiling and the key's default; a header above the key's default is capped at it. */
export function ceilingInForce(header: Micros | undefined, keyDefault: Micros | undefined): CostCeiling | undefined {
  if (header === undefined) return keyDefault === undefined ? undefined : { amount: keyDefault, setBy: 'key' };
  if (keyDefault !== undefined && keyDefault < header) return { amount: keyDefault, setBy: 'key' };
  return { amount: header, setBy: 'header' };
}

export interface CeilingOptions {
  /** The smallest output limit the request's upstream bodies can take (1, or more with a thinking budget). */
  minOutputTokens: number;
  /** The request field that limits output, named in the refusal. */
  outputLimitField: string;
}

/**
 * The worst case to reserve under `ceiling`: the requested one when it fits, else the one at the largest
 * output limit that fits. Throws a 402 naming the ceiling and the prompt's cost when even the smallest
 * output does not fit.
 */
export function withinCeiling(requested: WorstCase, fp: RequestFootprint, model: CatalogModel, ceiling: CostCeiling, opts: CeilingOptions): WorstCase {
  if (requested.amount <= ceiling.amount) return requested;
  const fits = Math.min(largestAffordableMaxTokens(ceiling.amount, requested.inputTokenBound, model), requested.outputTokens);
  if (fits >= opts.minOutputTokens) {
    const lowered = worstCase({ ...fp, maxOutputTokens: fits }, model);
    // By construction (largestAffordableMaxTokens), never above the ceiling: the check guards the arithmetic.
    if (lowered.amount <= ceiling.amount) return lowered;
  }
  throw promptAboveCeiling(worstCase({ ...fp, maxOutputTokens: opts.minOutputTokens }, model).amount, ceiling, opts);
}

function promptAboveCeiling(promptCost: Micros, ceiling: CostCeiling, opts: CeilingOptions): GatewayError {
  const setBy = ceiling.setBy === 'header' ? `set by ${COST_CEILING_HEADER}` : `set as this key's max cost per request (a ${COST_CEILING_HEADER} header can lower it, not raise it)`;
  const withOutput = opts.minOutputTokens === 1 ? 'with one output token' : `with the ${opts.minOutputTokens} output tokens its thinking budget needs (${opts.outputLimitField} above budget_tokens)`;
  return new GatewayError(
    402,
    `This request's prompt alone (${withOutput}) may cost up to ${formatUsd(promptCost)} USD, above the ceiling of ${formatUsd(ceiling.amount)} USD ${setBy}. Raise the ceiling or shorten the prompt; nothing was charged.`,
    {
      code: 'cost_ceiling_too_low',
      details: {
        ceiling_micro_usd: ceiling.amount,
        ceiling_usd: formatUsd(ceiling.amount),
        prompt_cost_micro_usd: promptCost,
        prompt_cost_usd: formatUsd(promptCost),
        ceiling_set_by: ceiling.setBy === 'header' ? COST_CEILING_HEADER : 'key',
      },
    },
  );
}
