// The metered exchange every completion endpoint shares: reserve the worst case, call an upstream
// (retrying and falling back while nothing has reached the client), relay, and settle exactly once
// with the actual cost — whatever happens in between.
import { isModelRefusal, type RequestDetail } from '../billing/request-detail.js';
import { credentialHeaders } from '../formats/index.js';
import { respondBeforeSettling } from '../settle/respond-first.js';
import { stampAnswerCost } from '../settle/answer-cost.js';
import { chargeOf, usdNumber, type ChargeOf } from '../billing/answer-cost.js';
import type { CatalogModel, CatalogUpstream, SecretResolver } from '../catalog/snapshot.js';
import type { Ledger, RequestStatus, ReservationOutcome, TokenUsage } from '../billing/ledger.js';
import { isLimitReason, isRateLimitReason, KEY_REFUSALS, LIMITS, type RateLimitReason, type RefusalReason } from '../limits/limits.js';
import { DEFAULT_RATE_LIMIT_WINDOW_MS } from '../billing/rate-limit-state.js';
import { rateLimitError, rateLimitHeaders } from './rate-limits.js';
import { formatUsd, formatUsdAmount, recordableUsage } from '../billing/money.js';
import type { SettlementQueue } from '../settle/settlement-queue.js';
import { largestAffordableMaxTokens, worstCase, type RequestFootprint } from '../reserve/worst-case.js';
import { ceilingInForce, COST_CEILING_HEADER, OUTPUT_LIMIT_HEADER, parseCostCeilingHeader, withinCeiling } from '../reserve/cost-ceiling.js';
import { GatewayError } from '../request/gateway-error.js';
import { LedgerUnavailableError, type LedgerHealth } from '../billing/ledger-health.js';
import { JournalBehindError } from '../record/journaled-ledger.js';
import type { JournalWriter } from '../record/journal-writer.js';
import type { GatewayContext } from '../request/state.js';
import type { UpstreamDispatchers } from '../upstream/dispatchers.js';
import type { UpstreamRouter } from '../upstream/router.js';
import { countTokens } from '../wire/token-count.js';
import { clientFormat, type ClientFormatName } from '../formats/index.js';
import { relayableUpstreamMessage } from '../wire/upstream-message.js';
import { ExchangeCancellation, type ShutdownSignal } from '../relay/client-stream.js';
import { emptyOutcome, type Relay, type RelayOutcome } from '../relay/relay.js';
import { UpstreamFailure, classifyTransportError, sendUpstream, withoutSecrets } from '../upstream/upstream-request.js';
import type { ExchangeObserver } from './observer.js';

export interface ExchangeDeps {
  ledger: Ledger;
  /** Refuses at once (503) while the ledger is down; turns ledger failures into that 503. */
  health: LedgerHealth;
  /** Settlement with retries that never drop one. */
  settlements: SettlementQueue;
  router: UpstreamRouter;
  dispatchers: UpstreamDispatchers;
  secrets: SecretResolver;
  observer: ExchangeObserver;
  requestTimeoutMs: number;
  holdMarginMs: number;
  /** Longest a stream write may wait for a client that stopped reading before the response is cut. */
  clientWriteTimeoutMs?: number;
  /** Silence after which a stream gets a keep-alive comment. */
  streamKeepAliveMs?: number;
  log: (event: string, fields: Record<string, unknown>) => void;
  /** The gateway's shutdown: past the drain bound it cuts the exchanges still open. */
  shutdown?: ShutdownSignal;
  /** The journal to PostgreSQL; while it is behind its bound, requests are refused before any hold. */
  journal?: Pick<JournalWriter, 'behind' | 'lag' | 'maxLagMs'>;
  /** The window of the keys' request and token limits (default 60,000 ms: per minute). */
  rateLimitWindowMs?: number;
}

export interface ExchangePlan {
  /** The format its errors are answered in (the Responses API answers in OpenAI's). */
  clientFormat: ClientFormatName;
  /** The request field that limits output, named in a 402's advice (max_tokens unless said). */
  outputLimitField?: string;
  model: CatalogModel;
  footprint: RequestFootprint;
  /** The smallest output limit every upstream body can take (default 1): a cost ceiling lowers it no further. */
  minOutputTokens?: number;
  stream: boolean;
  /** The upstream request body for one upstream, with the output limit the reservation covers. */
  upstreamBody(upstream: CatalogUpstream, outputLimit: number): string | Buffer;
  /** Extra headers for an upstream (anthropic-version, anthropic-beta, ...). */
  upstreamHeaders(upstream: CatalogUpstream): Record<string, string>;
  relay(upstream: CatalogUpstream): Relay;
  /** Prompt tokens by our own count, for when the upstream never reported usage. */
  estimateInputTokens(): Promise<number>;
}

/** What the ledger's refusal says beyond its reason: the amounts, the binding limit and whose it is. */
type MoneyRefusal = Pick<Extract<ReservationOutcome, { admitted: false }>, 'needed' | 'available' | 'availableOverall' | 'limit' | 'scopeName' | 'accountName'>;

/**
 * A refusal by a limit of money (402), or of the key itself (401), in the words the declaration gives it:
 * the binding limit named (a team's budget by the team's name), the worst case and what is left, and a
 * smaller output limit that would fit or what the person can do; a limit with nothing left at all says
 * so in its own sentence.
 */
function refusalError(plan: ExchangePlan, reason: Exclude<RefusalReason, RateLimitReason>, r: MoneyRefusal, inputTokenBound: number): GatewayError {
  if (!isLimitReason(reason)) {
    const key = KEY_REFUSALS[reason];
    return new GatewayError(key.status, `${key.wording}; create a new key in the dashboard.`, { code: key.code });
  }
  const { needed, available, availableOverall } = r;
  const limit = LIMITS[reason];
  const facts = { limit: r.limit === undefined ? '' : formatUsdAmount(r.limit), scopeName: r.scopeName ?? '', accountName: r.accountName ?? '' };
  const hint = largestAffordableMaxTokens(availableOverall, inputTokenBound, plan.model);
  const outputGiven = plan.footprint.maxOutputTokens !== undefined;
  const advice = hint > 0 ? ` A smaller output limit would fit: ${plan.outputLimitField ?? 'max_tokens'} ${hint} or less.` : ` ${limit.wording.remedy}`;
  const usedUp = 'usedUp' in limit.wording && available === 0 && hint === 0 ? limit.wording.usedUp : undefined;
  const base =
    usedUp !== undefined
      ? `${usedUp(facts)} This request's worst case is ${formatUsd(needed)} USD.`
      : `${limit.wording.refused(facts)}: its worst case is ${formatUsd(needed)} USD and ${formatUsd(available)} USD is left${outputGiven ? '' : ` (no ${plan.outputLimitField ?? 'max_tokens'} was given, so the model's default output limit of ${plan.model.defaultMaxOutputTokens} tokens was reserved)`}.`;
  return new GatewayError(limit.status, usedUp !== undefined ? base : base + advice, {
    code: reason,
    details: {
      needed_micro_usd: needed,
      available_micro_usd: available,
      needed_usd: formatUsd(needed),
      available_usd: formatUsd(available),
      ...(hint > 0 ? { [`${plan.outputLimitField ?? 'max_tokens'}_hint`]: hint } : {}),
    },
  });
}

function failureToClientError(f: UpstreamFailure, model: CatalogModel, format: ClientFormatName): GatewayError {
  if (f.kind === 'timeout') return new GatewayError(504, `The upstream of ${model.id} did not answer in time; try again.`, { code: 'upstream_timeout' });
  if (f.kind === 'connect') return new GatewayError(502, `The upstream of ${model.id} could not be reached; try again shortly.`, { code: 'upstream_unreachable' });
  const s = f.upstreamStatus ?? 502;
  if (s === 429) return new GatewayError(429, `The upstream of ${model.id} is rate limiting; retry after a moment.`, { code: 'upstream_rate_limited', retryAfterSeconds: Number(f.retryAfter) > 0 ? Number(f.retryAfter) : 1 });
  // Overloaded is 503 to OpenAI clients and 529 overloaded_error to Anthropic ones (docs/wire-formats.md B.5,
  // C.10): that is what each SDK raises as its overload error and retries.
  if (s === 503 || s === 529) return new GatewayError(clientFormat(format).overloadedStatus, `The upstream of ${model.id} is overloaded; try again shortly.`, { code: 'upstream_overloaded' });
  if (s >= 500) return new GatewayError(502, `The upstream of ${model.id} failed (HTTP ${s}); try again.`, { code: 'upstream_error' });
  if (s === 401 || s === 403) {
    // The upstream refused *our* credential: not the client's fault, and never the client's key.
    return new GatewayError(502, `The upstream of ${model.id} refused the gateway's credentials; this is a gateway configuration problem, please contact support.`, { code: 'upstream_auth_failed' });
  }
  return new GatewayError(s === 404 ? 400 : s, `The upstream of ${model.id} rejected the request: ${upstreamMessage(f.upstreamMessage)}`, { code: 'upstream_rejected' });
}

/** The upstream's own error message, short and without credentials. */
function upstreamMessage(message: string | undefined): string {
  return message === undefined || message === '' ? 'no details given.' : relayableUpstreamMessage(message).slice(0, 500);
}

function upstreamCredential(upstream: CatalogUpstream, secrets: SecretResolver): Record<string, string> {
  if (upstream.credentialsSecretRef === undefined) return {};
  const value = secrets.resolve(upstream.credentialsSecretRef);
  if (value === undefined) return {};
  return credentialHeaders(upstream.credentialsHeader, value);
}

/**
 * The usage an exchange is charged for. A request the upstream never accepted costs nothing. One it
 * accepted is charged its prompt whatever happened next (the client gone, the upstream broken off, the
 * deadline or the drain bound passed): at the upstream's final usage when it came, else at the prompt's
 * usage the upstream reported early (cache classes and all), else at our count of the prompt; plus the
 * output generated before the end, by our count.
 */
async function settleUsage(plan: ExchangePlan, outcome: RelayOutcome, accepted: boolean): Promise<TokenUsage> {
  if (outcome.usage !== undefined) return outcome.usage;
  if (!accepted) return { input: 0, output: 0, cachedInput: 0, reasoning: 0 };
  const [prompt, output, reasoning] = await Promise.all([
    outcome.reportedPrompt ?? plan.estimateInputTokens().then((input) => ({ input, cachedInput: 0 })),
    countTokens(outcome.generated),
    countTokens(outcome.reasoningGenerated),
  ]);
  return { ...prompt, output, reasoning: Math.min(reasoning, output) };
}

/**
 * How the exchange ended, for its record: what stopped it early (the client's close, the request
 * deadline, the drain bound) over what the relay saw of it, since each of those reaches the relay as a
 * cut upstream. A relay that completed stays completed unless its client left before the answer did.
 */
function endedAs(relayed: RequestStatus, cancellation: ExchangeCancellation): RequestStatus {
  if (cancellation.clientGone) return 'client_cancelled';
  if (relayed === 'completed') return relayed;
  if (cancellation.timedOut) return 'timed_out';
  if (cancellation.cutByShutdown) return 'shutdown_cut';
  return relayed;
}

const shuttingDown = (): GatewayError =>
  new GatewayError(503, 'The gateway is restarting and could not finish this request in time; retry it.', { code: 'gateway_shutting_down', retryAfterSeconds: 1 });

type Bound = ReturnType<typeof worstCase>;
type ExchangeKey = NonNullable<GatewayContext['state']['key']>;

/**
 * The worst case to reserve: the request's own, or under the cost ceiling in force (the header's, the
 * key's default, the lower of the two), at the largest output limit that fits. With a ceiling, the
 * answer names the output limit sent (a stream's headers leave with its first bytes).
 */
function boundOf(ctx: GatewayContext, plan: ExchangePlan, key: ExchangeKey): Bound {
  const requested = worstCase(plan.footprint, plan.model);
  const ceiling = ceilingInForce(parseCostCeilingHeader(ctx.req.headers[COST_CEILING_HEADER]), key.maxCostPerRequest);
  if (ceiling === undefined) return requested;
  const bound = withinCeiling(requested, plan.footprint, plan.model, ceiling, {
    minOutputTokens: plan.minOutputTokens ?? 1,
    outputLimitField: plan.outputLimitField ?? 'max_tokens',
  });
  ctx.set(OUTPUT_LIMIT_HEADER, String(bound.outputTokens));
  return bound;
}

/**
 * Reserves the worst case, or throws the refusal in the client's format. A reservation whose answer was
 * lost may have placed a hold: it is released at once (a zero settlement, retried until the ledger
 * answers) rather than left to the reaper for the whole hold life; if no hold was placed the settlement
 * finds nothing and changes nothing.
 */
async function reserveWorstCase(ctx: GatewayContext, deps: ExchangeDeps, plan: ExchangePlan, key: ExchangeKey, bound: Bound, windowMs: number): Promise<void> {
  const { requestId } = ctx.state;
  const { model } = plan;
  // Fail closed: money the gateway could not record is money it must not serve.
  if (deps.journal?.behind() === true) throw new JournalBehindError(deps.journal.lag().oldestMs, deps.journal.maxLagMs);
  // Whether the reservation will really be sent (a ledger known to be down refuses without sending).
  const attempted = deps.health.up;
  const reservation = await deps.observer.timeLedger('reserve', () =>
    deps.health.run(() => deps.ledger.reserve({
      requestId,
      accountId: key.accountId,
      keyId: key.id,
      // The key's team and member (its owner) are on its path: their budgets are weighed too.
      teamId: key.teamId,
      memberId: key.ownerId,
      amount: bound.amount,
      holdTtlMs: deps.requestTimeoutMs + deps.holdMarginMs,
      model: model.id,
      // The worst case counts against a token limit; the settlement gives back what was not used.
      rateLimitTokens: bound.inputTokenBound + bound.outputTokens,
      rateLimitWindowMs: windowMs,
    })),
  ).catch((err: unknown) => {
    if (attempted && err instanceof LedgerUnavailableError) {
      void deps.settlements.settle({
        requestId,
        accountId: key.accountId,
        keyId: key.id,
        teamId: key.teamId,
        memberId: key.ownerId,
        model: model.id,
        usage: { input: 0, output: 0, cachedInput: 0, reasoning: 0 },
        cost: 0,
        status: 'refused',
        latencyMs: 0,
      });
    }
    throw err;
  });
  if (!reservation.admitted) {
    deps.observer.reservation(ctx, reservation.reason);
    if (isRateLimitReason(reservation.reason)) {
      throw rateLimitError(plan.clientFormat, {
        reason: reservation.reason,
        needed: reservation.needed,
        available: reservation.available,
        state: reservation.rateLimit,
        windowMs,
        outputLimitField: plan.outputLimitField ?? 'max_tokens',
      });
    }
    throw refusalError(plan, reservation.reason, reservation, bound.inputTokenBound);
  }
  deps.observer.reservation(ctx, 'admitted');
  // Sent with the answer (headers set now go out with a stream's first bytes as with a whole reply).
  if (reservation.rateLimit !== undefined) ctx.set(rateLimitHeaders(plan.clientFormat, reservation.rateLimit));
}

/** What the upstream calls came to, read by the settlement whatever happened. */
interface ExchangeRun {
  outcome?: RelayOutcome;
  /**
   * The upstream that accepted the request: it answered with a success status (its 2xx response headers
   * arrived). From then on the request's prompt is charged whatever happens next; before, nothing is.
   */
  acceptedBy?: CatalogUpstream;
  /** The relay finished without error: the client's answer is complete and goes before the settlement. */
  relayed: boolean;
}

/** Calls the model's upstreams in the router's order until one answers, and relays its answer. */
async function relayFromUpstreams(ctx: GatewayContext, deps: ExchangeDeps, plan: ExchangePlan, bound: Bound, charge: ChargeOf, cancellation: ExchangeCancellation, run: ExchangeRun): Promise<void> {
  const { requestId } = ctx.state;
  const { model } = plan;
  let lastFailure: UpstreamFailure | undefined;
  for (const upstream of deps.router.candidates(model)) {
    const target = deps.dispatchers.target(upstream, plan.stream);
    const call = deps.observer.upstreamStarted(ctx, model, upstream, target.host, target.port, plan.footprint.maxOutputTokens ?? bound.outputTokens, plan.stream);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: plan.stream ? 'text/event-stream' : 'application/json',
      'x-request-id': requestId,
      ...plan.upstreamHeaders(upstream),
      ...upstreamCredential(upstream, deps.secrets),
    };
    call.injectTraceHeaders(headers);
    // Built outside the transport try: a request the upstream's format cannot express is the
    // client's error (a GatewayError), not an upstream failure to retry.
    const body = plan.upstreamBody(upstream, bound.outputTokens);
    let response;
    try {
      response = await sendUpstream(target, upstream, body, headers, cancellation);
    } catch (err) {
      const failure = classifyTransportError(err);
      call.failed(failure);
      if (failure.kind === 'aborted') {
        run.outcome = emptyOutcome(endedAs('client_cancelled', cancellation));
        if (cancellation.timedOut) throw new GatewayError(504, `The upstream of ${model.id} did not finish within ${deps.requestTimeoutMs} ms.`, { code: 'upstream_timeout' });
        if (cancellation.cutByShutdown) throw shuttingDown();
        return;
      }
      deps.router.recordFailure(model, upstream);
      lastFailure = failure;
      if (failure.retryable) continue;
      break;
    }
    deps.router.recordSuccess(model, upstream);
    // sendUpstream returns only a 2xx response: the upstream has accepted the request.
    run.acceptedBy = upstream;
    call.relayStarted(plan.stream);
    try {
      run.outcome = await plan.relay(upstream)({ ctx, response, cancellation, redact: (text) => withoutSecrets(text, headers), costUsd: (usage) => usdNumber(charge(usage)) });
      run.outcome.status = endedAs(run.outcome.status, cancellation);
      run.relayed = true;
    } catch (err) {
      // A whole reply whose body broke off (the upstream cut, or the exchange was stopped while it came).
      const carried = (err as { relayOutcome?: RelayOutcome }).relayOutcome;
      run.outcome = carried ?? emptyOutcome('upstream_failed');
      run.outcome.status = endedAs(run.outcome.status, cancellation);
      call.finished(run.outcome);
      if (err instanceof GatewayError) throw err;
      if (cancellation.cutByShutdown) throw shuttingDown();
      if (cancellation.timedOut) throw new GatewayError(504, `The upstream of ${model.id} did not finish within ${deps.requestTimeoutMs} ms.`, { code: 'upstream_timeout' });
      throw new GatewayError(502, `The upstream of ${model.id} sent a reply the gateway could not read.`, { code: 'upstream_invalid_response' });
    }
    call.finished(run.outcome);
    return;
  }
  run.outcome = emptyOutcome('upstream_failed');
  throw failureToClientError(lastFailure ?? new UpstreamFailure('connect', undefined, undefined, 'no upstream'), model, plan.clientFormat);
}

/** Reserve, call and relay, then settle exactly once: the metered exchange of one request. */
export async function runExchange(ctx: GatewayContext, deps: ExchangeDeps, plan: ExchangePlan): Promise<void> {
  const key = ctx.state.key;
  if (key === undefined) throw new Error('runExchange needs an authenticated key');
  const bound = boundOf(ctx, plan, key);
  await reserveWorstCase(ctx, deps, plan, key, bound, deps.rateLimitWindowMs ?? DEFAULT_RATE_LIMIT_WINDOW_MS);
  // What the settlement will charge for a usage: the answer reports exactly this figure.
  const charge = chargeOf(plan.model.pricing, bound.amount);
  const cancellation = new ExchangeCancellation(ctx.res, deps.requestTimeoutMs, deps.clientWriteTimeoutMs, deps.shutdown, deps.streamKeepAliveMs);
  const run: ExchangeRun = { relayed: false };
  const started = performance.now();
  try {
    await relayFromUpstreams(ctx, deps, plan, bound, charge, cancellation, run);
  } finally {
    if (cancellation.clientGone) ctx.state.clientClosed = true;
    cancellation.dispose();
    const final = run.outcome ?? emptyOutcome('upstream_failed');
    // Respond first, settle after: the client's last byte does not wait on the ledger (streams are ended by their relay).
    // A whole answer carries its charge, so its usage is settled on before it is sent.
    let usage: TokenUsage | undefined;
    const accepted = run.acceptedBy !== undefined;
    if (run.relayed && !plan.stream) {
      usage = await usageToSettle(deps, plan, final, accepted, ctx.state.requestId);
      stampAnswerCost(ctx, final.answerUsage, charge(usage));
      respondBeforeSettling(ctx);
    }
    await settle(ctx, deps, plan, final, started, run.acceptedBy, bound, usage ?? (await usageToSettle(deps, plan, final, accepted, ctx.state.requestId)), charge);
  }
}

async function settle(
  ctx: GatewayContext,
  deps: ExchangeDeps,
  plan: ExchangePlan,
  outcome: RelayOutcome,
  started: number,
  servedBy: CatalogUpstream | undefined,
  bound: { inputTokenBound: number; outputTokens: number },
  usage: TokenUsage,
  charge: ChargeOf,
): Promise<void> {
  const key = ctx.state.key as NonNullable<GatewayContext['state']['key']>;
  // More than the reservation allowed for: the upstream ignored the output limit or misreports. The
  // charge stays capped at the hold; the report is flagged for whoever looks after that upstream.
  if (usage.output > bound.outputTokens || usage.input > bound.inputTokenBound) {
    deps.log('usage_oversized', {
      requestId: ctx.state.requestId,
      model: plan.model.id,
      upstream: servedBy?.name,
      inputTokens: usage.input,
      outputTokens: usage.output,
      inputTokenBound: bound.inputTokenBound,
      outputTokenLimit: bound.outputTokens,
    });
  }
  // The charge the answer reported (the ledger caps at the hold itself; capping here changes nothing).
  const cost = charge(usage);
  const request = {
    requestId: ctx.state.requestId,
    accountId: key.accountId,
    keyId: key.id,
    teamId: key.teamId,
    memberId: key.ownerId,
    model: plan.model.id,
    usage,
    cost,
    status: outcome.status,
    latencyMs: Math.round(performance.now() - started),
    // The status the client was sent; none yet when the exchange failed before answering (the error
    // middleware answers after this, and Koa's 404 default is not what the client gets).
    detail: requestDetailOf(ctx.res.headersSent ? ctx.res.statusCode : ctx.body !== undefined && ctx.body !== null ? ctx.status : undefined, outcome, servedBy?.name, started),
  };
  // One attempt here; a failure is kept and retried by the queue, off the response path, until it
  // succeeds (late, after the reaper, it still charges exactly once). The metrics follow when it does.
  await deps.settlements.settle(request, (result) => {
    deps.observer.settled(ctx, plan.model, servedBy, usage, result.charged, outcome);
    ctx.state.outcome = { inputTokens: usage.input, outputTokens: usage.output, costMicros: result.charged, ...(ctx.state.outcome?.errorCode ? { errorCode: ctx.state.outcome.errorCode } : {}) };
  });
}

/** The usage a settlement records: the upstream's report, else the estimate, as the ledger takes it. Never throws. */
async function usageToSettle(deps: ExchangeDeps, plan: ExchangePlan, outcome: RelayOutcome, accepted: boolean, requestId: string): Promise<TokenUsage> {
  let usage: TokenUsage = { input: 0, output: 0, cachedInput: 0, reasoning: 0 };
  try {
    usage = await settleUsage(plan, outcome, accepted);
  } catch (err) {
    deps.log('usage_estimate_failed', { requestId, error: String(err) });
  }
  return recordableUsage(usage);
}

/** What the usage record keeps of the exchange beyond money: the status the client got, how it ended, who served it. */
function requestDetailOf(httpStatus: number | undefined, outcome: { finishReason: string | undefined; firstTokenAt: number | undefined }, upstream: string | undefined, started: number): RequestDetail {
  const detail: RequestDetail = {};
  if (httpStatus !== undefined) detail.httpStatus = httpStatus;
  if (outcome.finishReason !== undefined) detail.finishReason = outcome.finishReason;
  if (upstream !== undefined) detail.upstream = upstream;
  if (isModelRefusal(outcome.finishReason)) detail.modelRefused = true;
  if (outcome.firstTokenAt !== undefined) detail.ttftMs = Math.max(0, Math.round(outcome.firstTokenAt - started));
  return detail;
}
