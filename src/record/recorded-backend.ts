// The backend once PostgreSQL is the record: accounts, keys and credits commit there first and the hot
// path (memory or Redis) follows; settlements reach it through the journal.
import type { Backend, HotBackend } from '../billing/backends.js';
import type { Database } from './database.js';
import { RecordedAccountStore } from './recorded-account-store.js';
import { RecordedLedger } from './recorded-ledger.js';

export function recordedBackend(hot: HotBackend, db: Database, keyMarker: string): Backend {
  return {
    accounts: new RecordedAccountStore({ db, hot: hot.accounts, keyMarker }),
    ledger: new RecordedLedger(hot.ledger, db),
  };
}
