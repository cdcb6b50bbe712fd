// The backend once PostgreSQL is the record: accounts, keys and credits commit there first and the hot
// path (memory or Redis) follows; settlements reach it through the journal; a Redis hot path loads each
// account's money from the record (on creation, and again after a wipe).
import type { Backend, HotBackend } from '../billing/backends.js';
import type { Database } from './database.js';
import { RecordedAccountStore, type RecordedAccountStoreOptions } from './recorded-account-store.js';
import { RecordedLedger, type RecordedLedgerOptions } from './recorded-ledger.js';

/** The backend over the record; its ledger also applies committed movements (top-ups, refunds). */
export interface RecordedBackend extends Backend {
  accounts: RecordedAccountStore;
  ledger: RecordedLedger;
}

export interface RecordedBackendOptions extends Omit<RecordedLedgerOptions, 'restoreKeys'> {
  /** How often keys with a change the hot path may lack are pushed again (RecordedAccountStoreOptions). */
  keySweepMs?: number;
  /** Record look-ups per second of unknown key hashes (RecordedAccountStoreOptions). */
  unknownKeyLookupsPerSecond?: number;
  /** Each record query a key lookup makes (RecordedAccountStoreOptions). */
  onKeyQuery?: RecordedAccountStoreOptions['onKeyQuery'];
}

export function recordedBackend(hot: HotBackend, db: Database, keyMarker: string, opts: RecordedBackendOptions = {}): RecordedBackend {
  const { keySweepMs, unknownKeyLookupsPerSecond, onKeyQuery, ...ledgerOpts } = opts;
  // A new account cannot have settlements in flight: it is loaded with no rebuild window.
  const accounts: RecordedAccountStore = new RecordedAccountStore({
    db,
    hot: hot.accounts,
    keyMarker,
    onAccountCreated: (id) => ledger.seed(id, 0),
    ...(keySweepMs === undefined ? {} : { keySweepMs }),
    ...(unknownKeyLookupsPerSecond === undefined ? {} : { unknownKeyLookupsPerSecond }),
    ...(onKeyQuery === undefined ? {} : { onKeyQuery }),
  });
  const ledger = new RecordedLedger(hot.ledger, db, { ...ledgerOpts, restoreKeys: (id) => accounts.restoreAccountKeys(id) });
  return { accounts, ledger };
}
