// Top-ups as a running part of a process, started by its entry point: the providers configured in the
// environment (or, for the local run, the test-mode fakes), the top-up service, automatic top-ups when a
// provider saves cards, the catch-up job (after an outage, recent provider events are applied once
// each) and the providers' webhook routes, which the server on the dashboard's port serves.
import type Koa from 'koa';
import { asActor } from '../record/change-actor.js';
import type { Database } from '../record/database.js';
import { AutoTopUps, type AutoTopUpOptions } from './auto-top-up.js';
import { paymentProvidersFromEnv, startTestModePayments, type TestModePayments } from './payments-config.js';
import type { ProviderModule } from './provider-module.js';
import type { SavedCards } from './provider.js';
import { PROVIDERS } from './providers/index.js';
import { TopUpService, type TopUpServiceOptions } from './service.js';
import { topUpWebhooks } from './webhooks.js';

/** For the banner and the start-up log: the test-mode fakes' addresses, or the real providers configured. */
export type PaymentsMode = { real: false; fakes: Array<{ title: string; url: string }> } | { real: true; providers: string[] };

export interface TopUpsOptions {
  db: Database;
  /** Where payments move money (given the record's hot-path step, RecordedLedger.applyCommitted). */
  accounts: TopUpServiceOptions['accounts'];
  env: Record<string, string | undefined>;
  /** The providers Tollgate knows (default: providers/index.ts); each reads its settings from `env`. */
  registry?: readonly ProviderModule[];
  /** With no provider configured, offer the test-mode fakes (the local run), unless TOLLGATE_PAYMENTS=off. */
  testModePayments: boolean;
  /** Where the test-mode fakes listen (the dashboard's host). */
  host: string;
  /** The dashboard's address as holders reach it (DASHBOARD_PUBLIC_URL); default: where the webhooks are served. */
  publicUrl?: string;
  /** How often recent provider events are listed and applied (0: never). */
  catchUpIntervalMs?: number;
  /** How often balances are compared with automatic top-up thresholds (default 15 s; 0: never). */
  autoTopUpIntervalMs?: number;
  /** Mails an account's holders (an automatic top-up that was not paid, told by its answer or by its event). */
  notifyHolders?: AutoTopUpOptions['notifyHolders'];
  onError?: (what: string, err: unknown) => void;
}

export interface RunningTopUps {
  topUps: TopUpService;
  autoTopUps: AutoTopUps | undefined;
  /** The test-mode fakes' addresses, or the real providers configured. */
  payments: PaymentsMode;
  /** The providers' webhook routes, for the server on the dashboard's port. */
  webhooks: Koa.Middleware;
  /** Where the webhooks are served once it listens: the default public URL, and where the fakes deliver. */
  servedAt(url: string): void;
  close(): Promise<void>;
}

/** Events this far back are listed by each catch-up pass. */
const CATCH_UP_WINDOW_S = 3 * 24 * 3600;

/**
 * Repeats `job` every `ms` (none when ms is not positive), without keeping the process alive. The audit
 * log names the job (`what`) as the author of what it changes.
 */
function every(ms: number, job: () => Promise<unknown>, what: string, onError: TopUpsOptions['onError']): NodeJS.Timeout | undefined {
  if (!(ms > 0)) return undefined;
  const timer = setInterval(() => {
    asActor({ kind: 'system', label: what }, job).catch((err: unknown) => onError?.(what, err));
  }, ms);
  timer.unref();
  return timer;
}

/** Starts top-ups, or returns undefined when no provider is set up (nor test mode offered). */
export async function startTopUps(opts: TopUpsOptions): Promise<RunningTopUps | undefined> {
  const registry = opts.registry ?? PROVIDERS;
  const real = paymentProvidersFromEnv(opts.env, registry);
  const testMode: TestModePayments | undefined =
    real.length === 0 && opts.testModePayments && opts.env.TOLLGATE_PAYMENTS !== 'off' ? await startTestModePayments(opts.host, registry) : undefined;
  const providers = testMode?.providers ?? real;
  if (providers.length === 0) return undefined;
  let publicUrl = opts.publicUrl ?? '';
  const topUps = new TopUpService({
    db: opts.db,
    providers,
    registry,
    accounts: opts.accounts,
    publicUrl: () => publicUrl,
    ...(opts.notifyHolders === undefined ? {} : { notifyHolders: opts.notifyHolders }),
  });
  const cardProvider = providers.find((p): p is typeof p & { savedCards: SavedCards } => p.savedCards !== undefined);
  const autoTopUps =
    cardProvider === undefined
      ? undefined
      : new AutoTopUps({
          db: opts.db,
          provider: cardProvider,
          publicUrl: () => publicUrl,
          ...(opts.notifyHolders === undefined ? {} : { notifyHolders: opts.notifyHolders }),
          onError: (what, err) => opts.onError?.(what, err),
        });
  const catchUp = every(opts.catchUpIntervalMs ?? 0, () => topUps.catchUp(Math.floor(Date.now() / 1000) - CATCH_UP_WINDOW_S), 'top-ups catch-up', opts.onError);
  const autoEvery = opts.autoTopUpIntervalMs ?? Number(opts.env.TOLLGATE_AUTO_TOP_UP_INTERVAL_MS ?? 15_000);
  const autoCheck = autoTopUps === undefined ? undefined : every(autoEvery, () => autoTopUps.check(), 'automatic top-ups', opts.onError);
  return {
    topUps,
    autoTopUps,
    payments: testMode !== undefined ? { real: false, fakes: testMode.fakes } : { real: true, providers: real.map((p) => p.name) },
    webhooks: topUpWebhooks(topUps),
    servedAt: (url) => {
      if (publicUrl === '') publicUrl = url;
      testMode?.deliverTo(url);
    },
    close: async () => {
      if (catchUp !== undefined) clearInterval(catchUp);
      if (autoCheck !== undefined) clearInterval(autoCheck);
      await testMode?.close();
    },
  };
}
