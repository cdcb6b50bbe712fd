// A gateway harness with the dashboard beside it, as the dashboard's organization, team and usage tests
// start them: one account service over the harness's backend (a revoke reaches the gateway's key
// cache), and the dashboard on a free loopback port, over the same record.
import { AccountService } from '../../src/account-service/account-service.js';
import { startDashboard } from '../../src/dashboard/server.js';
import { DashboardService } from '../../src/dashboard/service.js';
import { AttemptThrottle } from '../../src/dashboard/throttle.js';
import type { Database } from '../../src/record/database.js';
import type { RecordedLedger } from '../../src/record/recorded-ledger.js';
import { startHarness, type Harness, type HarnessOptions } from './gateway-harness.js';

export interface GatewayDashboard {
  harness: Harness;
  accounts: AccountService;
  dash: { url: string; close(): Promise<void> };
  close(): Promise<void>;
}

export interface GatewayDashboardOptions {
  ledger?: HarnessOptions['ledger'];
  /** Money movements committed to the record reach the Redis ledger at once, as in gateway-main. */
  applyCommitted?: boolean;
  /** Sign-up and sign-in throttles wide enough for a test that signs many people in from one address. */
  wideThrottles?: boolean;
}

export async function startGatewayDashboard(db: Database, opts: GatewayDashboardOptions = {}): Promise<GatewayDashboard> {
  const harness = await startHarness({ record: db, ...(opts.ledger === undefined ? {} : { ledger: opts.ledger }) });
  const ledger = harness.backend.ledger as RecordedLedger;
  const accounts = new AccountService({
    accounts: harness.backend.accounts,
    ledger,
    onRevoke: () => harness.gateway.authenticator.forget(),
    ...(opts.applyCommitted === true ? { applyCommitted: (m, r) => ledger.applyCommitted(m, r) } : {}),
  });
  const wide = (): AttemptThrottle => new AttemptThrottle({ perAccount: 50, perAddress: 1000, windowMs: 60_000 });
  const service = new DashboardService({ db, accounts, signUp: true, sessionTtlMs: 3_600_000, ...(opts.wideThrottles === true ? { throttles: { signUp: wide(), signIn: wide() } } : {}) });
  const dash = await startDashboard({ service, secureCookie: false }, 0, '127.0.0.1');
  return {
    harness,
    accounts,
    dash,
    async close() {
      await dash.close();
      await harness.close();
    },
  };
}
