// The audit log's record and chain, on a real PostgreSQL (and PGlite, the one-machine run): entries are
// written in the change's own transaction with who made it, secrets never appear, bookkeeping the hot
// path moves writes none, the log refuses edits, and `verify` names the first entry tampered with however
// it was tampered with (as a superuser could, past the triggers).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainHead, pruneChain, verifyChain } from '../../src/audit/chain.js';
import { recordAuditEvent } from '../../src/audit/events.js';
import { asActor, type ChangeActor } from '../../src/record/change-actor.js';
import { openPglite, type Database } from '../../src/record/database.js';
import { migrate } from '../../src/record/migrate.js';
import { createTestDatabase, useTestDatabase } from '../helpers/test-database.js';

const t = useTestDatabase('audit');
const alice: ChangeActor = { kind: 'user', id: 'u_alice', label: 'alice@example.com', address: '203.0.113.7', userAgent: 'Mozilla/5.0 test', requestId: 'req_1' };

interface Entry {
  seq: number;
  account_id: string | null;
  actor_kind: string;
  actor_id: string | null;
  actor_label: string | null;
  address: string | null;
  user_agent: string | null;
  action: string;
  target: string | null;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  request_id: string | null;
}

async function entriesAfter(db: Database, seq: number): Promise<Entry[]> {
  return (await db.query<Entry>('SELECT * FROM audit_log WHERE seq > $1 ORDER BY seq', [seq])).rows.map((e) => ({ ...e, seq: Number(e.seq) }));
}

async function headSeq(db: Database): Promise<number> {
  return (await chainHead(db)).seq;
}

let n = 0;
async function newAccountWithKey(db: Database): Promise<{ account: string; key: string }> {
  n += 1;
  const account = `acct_audit_${n}_${Date.now()}`;
  const key = `key_audit_${n}_${Date.now()}`;
  await db.query('INSERT INTO accounts (id, name) VALUES ($1, $2)', [account, 'Audit test']);
  await db.query(
    `INSERT INTO api_keys (id, account_id, secret_hash, display_prefix, last_four, name) VALUES ($1, $2, $3, 'sk-tg-Abc', 'wxyz', 'ci')`,
    [key, account, `hash_of_secret_${key}`],
  );
  return { account, key };
}

/** Runs `sql` as a superuser would to get past the log's own triggers. */
async function tamper(db: Database, sql: string, params: (string | number)[] = []): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query("SET LOCAL session_replication_role = 'replica'");
    await tx.query(sql, params);
  });
}

describe('audit entries', () => {
  it("a change made by a user is recorded in its own transaction, with who, from where, before and after", async () => {
    const { account, key } = await newAccountWithKey(t.db);
    const from = await headSeq(t.db);
    await asActor(alice, () => t.db.query('UPDATE api_keys SET monthly_cap = 5000000, version = version + 1 WHERE id = $1', [key]));
    const [e, ...more] = await entriesAfter(t.db, from);
    expect(more).toEqual([]);
    expect(e).toMatchObject({
      account_id: account,
      actor_kind: 'user',
      actor_id: 'u_alice',
      actor_label: 'alice@example.com',
      address: '203.0.113.7',
      user_agent: 'Mozilla/5.0 test',
      action: 'api_keys.update',
      target: key,
      request_id: 'req_1',
    });
    expect(e?.before?.monthly_cap).toBeNull();
    expect(e?.after?.monthly_cap).toBe(5000000);
    // The hash of the key's secret is never in the log.
    expect(JSON.stringify(e)).not.toContain('hash_of_secret');
    expect(e?.after).not.toHaveProperty('secret_hash');
  });

  it('a change rolled back leaves no entry, and the chain does not move', async () => {
    const { key } = await newAccountWithKey(t.db);
    const head = await chainHead(t.db);
    await expect(
      asActor(alice, () =>
        t.db.transaction(async (tx) => {
          await tx.query('UPDATE api_keys SET name = $2 WHERE id = $1', [key, 'renamed']);
          throw new Error('the change fails after its write');
        }),
      ),
    ).rejects.toThrow('the change fails');
    expect(await chainHead(t.db)).toEqual(head);
  });

  it("the journal's spend on a key and a team, and version bumps alone, write no entry", async () => {
    const { account, key } = await newAccountWithKey(t.db);
    await t.db.query('INSERT INTO teams (id, account_id, name) VALUES ($1, $2, $3)', [`team_${key}`, account, 'search']);
    const from = await headSeq(t.db);
    await t.db.query('UPDATE api_keys SET lifetime_spent = lifetime_spent + 1234 WHERE id = $1', [key]);
    await t.db.query('UPDATE teams SET lifetime_spent = lifetime_spent + 1234 WHERE id = $1', [`team_${key}`]);
    await t.db.query('UPDATE api_keys SET hot_version = hot_version + 1 WHERE id = $1', [key]);
    await t.db.query(`INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key, request_id) VALUES ($1, 'usage', -1234, $2, 'req_u')`, [account, `usage_${key}`]);
    expect(await entriesAfter(t.db, from)).toEqual([]);
    // An admin credit is money moved by a person: recorded.
    await asActor({ kind: 'admin_token', id: 'ops', label: 'admin API' }, () =>
      t.db.query(`INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key, memo) VALUES ($1, 'admin_credit', 5000000, $2, 'goodwill')`, [account, `credit_${key}`]),
    );
    const [credit] = await entriesAfter(t.db, from);
    expect(credit).toMatchObject({ action: 'ledger_entries.insert', actor_kind: 'admin_token', actor_id: 'ops', account_id: account });
    expect(credit?.after).toMatchObject({ kind: 'admin_credit', amount: 5000000, memo: 'goodwill' });
  });

  it("a new password is recorded as changed, never its hash; a TOTP secret never appears", async () => {
    const { account } = await newAccountWithKey(t.db);
    const user = `u_${account}`;
    await t.db.query(`INSERT INTO dashboard_users (id, email, password_hash, role, account_id) VALUES ($1, $2, 'scrypt$old-hash', 'holder', $3)`, [user, `${user}@example.com`, account]);
    const from = await headSeq(t.db);
    await asActor(alice, () => t.db.query(`UPDATE dashboard_users SET password_hash = 'scrypt$new-hash' WHERE id = $1`, [user]));
    await asActor(alice, () => t.db.query(`UPDATE dashboard_users SET totp_secret = 'JBSWY3DPEHPK3PXP', totp_enabled_at = now() WHERE id = $1`, [user]));
    // A sign-in's TOTP step moves totp_last_step only: no entry.
    await t.db.query('UPDATE dashboard_users SET totp_last_step = 99 WHERE id = $1', [user]);
    const entries = await entriesAfter(t.db, from);
    expect(entries.map((e) => e.action)).toEqual(['dashboard_users.update', 'dashboard_users.update']);
    expect(entries[0]?.after?.password_hash).toBe('[secret, changed]');
    expect(entries[1]?.after).not.toHaveProperty('password_hash');
    expect(entries[1]?.after?.totp_enabled_at).not.toBeNull();
    const all = JSON.stringify(entries);
    expect(all).not.toContain('scrypt$');
    expect(all).not.toContain('JBSWY3DPEHPK3PXP');
  });

  it('an event with no row (a failed sign-in) is recorded with the acting context', async () => {
    const from = await headSeq(t.db);
    await asActor({ kind: 'user', address: '198.51.100.9', userAgent: 'curl/8' }, () =>
      recordAuditEvent(t.db, { action: 'sign_in.failed', target: 'bob@example.com', detail: { method: 'password', reason: 'wrong password' } }),
    );
    const [e] = await entriesAfter(t.db, from);
    expect(e).toMatchObject({ action: 'sign_in.failed', target: 'bob@example.com', address: '198.51.100.9', actor_kind: 'user' });
    expect(e?.after).toEqual({ method: 'password', reason: 'wrong password' });
  });

  it('a change with no actor is the system’s', async () => {
    const from = await headSeq(t.db);
    await t.db.query('INSERT INTO accounts (id, name) VALUES ($1, $2)', [`acct_sys_${Date.now()}`, 'by the system']);
    const [e] = await entriesAfter(t.db, from);
    expect(e).toMatchObject({ actor_kind: 'system', actor_id: null, action: 'accounts.insert' });
  });

  it('the log refuses UPDATE, DELETE and TRUNCATE', async () => {
    await newAccountWithKey(t.db);
    await expect(t.db.query("UPDATE audit_log SET action = 'nothing'")).rejects.toThrow(/append-only/);
    await expect(t.db.query('DELETE FROM audit_log')).rejects.toThrow(/append-only/);
    await expect(t.db.query('TRUNCATE audit_log')).rejects.toThrow(/append-only/);
  });

  it('a change waiting on a lock another change holds does not deadlock on the chain', async () => {
    // The chain's head is locked at commit, not at the first entry: a transaction that wrote an entry and
    // then waits for a row lock never holds up the writer of that row's entries.
    const a = await newAccountWithKey(t.db);
    const b = await newAccountWithKey(t.db);
    let holderHasLock!: () => void;
    const lockHeld = new Promise<void>((r) => (holderHasLock = r));
    let waiterWrote!: () => void;
    const waiterHasWritten = new Promise<void>((r) => (waiterWrote = r));
    const holder = t.db.transaction(async (tx) => {
      await tx.query('SELECT id FROM accounts WHERE id = $1 FOR UPDATE', [b.account]);
      holderHasLock();
      await waiterHasWritten;
      // Give the waiter time to block on the row lock.
      await new Promise((r) => setTimeout(r, 200));
      await tx.query("UPDATE api_keys SET name = 'by the holder' WHERE id = $1", [b.key]);
    });
    await lockHeld;
    const waiter = t.db.transaction(async (tx) => {
      await tx.query("UPDATE api_keys SET name = 'by the waiter' WHERE id = $1", [a.key]);
      waiterWrote();
      await tx.query('SELECT id FROM accounts WHERE id = $1 FOR UPDATE', [b.account]);
    });
    await Promise.all([holder, waiter]);
    expect(await verifyChain(t.db)).toMatchObject({ ok: true });
  });

  it('concurrent writers never fork the chain', async () => {
    const before = await headSeq(t.db);
    await Promise.all(Array.from({ length: 24 }, () => asActor(alice, () => newAccountWithKey(t.db))));
    expect(await headSeq(t.db)).toBe(before + 48);
    const report = await verifyChain(t.db);
    expect(report).toMatchObject({ ok: true });
  });
});

describe('verify names the first entry tampered with', () => {
  // Each case on a database of its own, with a chain of 12 entries (6 accounts with a key each).
  let made: { url: string; drop(): Promise<void> }[] = [];
  async function chainOfTwelve(): Promise<Database> {
    const created = await createTestDatabase('auditv');
    made.push(created);
    const { openPostgres } = await import('../../src/record/database.js');
    const db = await openPostgres(created.url, { max: 2 });
    for (let i = 0; i < 6; i += 1) await asActor(alice, () => newAccountWithKey(db));
    expect(await verifyChain(db)).toMatchObject({ ok: true, checked: 12 });
    return db;
  }
  afterAll(async () => {
    await Promise.all(made.map((m) => m.drop()));
    made = [];
  });

  it('an entry edited', async () => {
    const db = await chainOfTwelve();
    await tamper(db, `UPDATE audit_log SET after = jsonb_set(after, '{name}', '"someone else"') WHERE seq = 5`);
    expect((await verifyChain(db)).firstBreak).toMatchObject({ seq: 5, reason: 'edited' });
    await db.close();
  });

  it('an entry edited and its hash recomputed', async () => {
    const db = await chainOfTwelve();
    await tamper(db, `UPDATE audit_log l SET actor_label = 'mallory@example.com' WHERE seq = 7`);
    await tamper(
      db,
      `UPDATE audit_log l SET hash = encode(sha256(convert_to(jsonb_build_array(l.seq, to_char(l.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), l.account_id,
         l.actor_kind, l.actor_id, l.actor_label, l.address, l.user_agent, l.action, l.target, l.before, l.after, l.request_id, l.prev_hash)::text, 'UTF8')), 'hex') WHERE seq = 7`,
    );
    expect((await verifyChain(db)).firstBreak).toMatchObject({ seq: 7, reason: 'edited' });
    await db.close();
  });

  it('an entry deleted', async () => {
    const db = await chainOfTwelve();
    await tamper(db, 'DELETE FROM audit_log WHERE seq = 3');
    expect((await verifyChain(db)).firstBreak).toMatchObject({ seq: 3, reason: 'missing' });
    await db.close();
  });

  it('two entries swapped', async () => {
    const db = await chainOfTwelve();
    await tamper(db, 'UPDATE audit_log SET seq = -1 WHERE seq = 8');
    await tamper(db, 'UPDATE audit_log SET seq = 8 WHERE seq = 9');
    await tamper(db, 'UPDATE audit_log SET seq = 9 WHERE seq = -1');
    expect((await verifyChain(db)).firstBreak).toMatchObject({ seq: 8, reason: 'edited' });
    await db.close();
  });

  it('the newest entries cut off', async () => {
    const db = await chainOfTwelve();
    await tamper(db, 'DELETE FROM audit_log WHERE seq >= 11');
    expect((await verifyChain(db)).firstBreak).toMatchObject({ seq: 11, reason: 'head_mismatch' });
    await db.close();
  });

  it('the whole table and its head rewritten: caught by the exported head', async () => {
    const db = await chainOfTwelve();
    const exported = await chainHead(db);
    // A consistent forgery: every entry re-chained after entry 4's change, head included.
    await tamper(db, `UPDATE audit_log SET actor_label = 'mallory@example.com' WHERE seq = 4`);
    for (let seq = 4; seq <= 12; seq += 1) {
      await tamper(
        db,
        `UPDATE audit_log l SET prev_hash = (SELECT hash FROM audit_log WHERE seq = $1 - 1) WHERE seq = $1`,
        [seq],
      );
      await tamper(
        db,
        `UPDATE audit_log l SET hash = encode(sha256(convert_to(jsonb_build_array(l.seq, to_char(l.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), l.account_id,
           l.actor_kind, l.actor_id, l.actor_label, l.address, l.user_agent, l.action, l.target, l.before, l.after, l.request_id, l.prev_hash)::text, 'UTF8')), 'hex') WHERE seq = $1`,
        [seq],
      );
    }
    await tamper(db, 'UPDATE audit_chain SET head_hash = (SELECT hash FROM audit_log WHERE seq = 12)');
    expect(await verifyChain(db)).toMatchObject({ ok: true });
    expect((await verifyChain(db, exported)).firstBreak).toMatchObject({ seq: 12, reason: 'edited' });
    await db.close();
  });

  it('pruning keeps the chain verifiable from its anchor', async () => {
    const db = await chainOfTwelve();
    const exported = await chainHead(db);
    await tamper(db, "UPDATE audit_log SET at = at - interval '400 days' WHERE seq <= 6");
    // The edit above broke entries 1-6's hashes; pruning takes exactly them away.
    expect(await pruneChain(db, new Date(Date.now() - 300 * 86_400_000))).toBe(6);
    const report = await verifyChain(db, exported);
    expect(report).toMatchObject({ ok: true, checked: 6, head: { seq: 12, prunedThrough: 6 } });
    await tamper(db, `UPDATE audit_log SET target = 'x' WHERE seq = 7`);
    expect((await verifyChain(db)).firstBreak).toMatchObject({ seq: 7, reason: 'edited' });
    await db.close();
  });
});

describe('on PGlite (the one-machine run)', () => {
  let db: Database;
  beforeAll(async () => {
    db = await openPglite();
    await migrate(db);
  });
  afterAll(async () => db.close());

  it('records changes with their actor and verifies', async () => {
    const from = await headSeq(db);
    await asActor(alice, () => newAccountWithKey(db));
    await asActor(alice, () => db.transaction((tx) => tx.query("UPDATE accounts SET name = 'renamed' WHERE id LIKE 'acct_audit_%'")));
    const entries = await entriesAfter(db, from);
    expect(entries.map((e) => [e.action, e.actor_id])).toEqual([
      ['accounts.insert', 'u_alice'],
      ['api_keys.insert', 'u_alice'],
      ['accounts.update', 'u_alice'],
    ]);
    expect(await verifyChain(db)).toMatchObject({ ok: true });
    await expect(db.query('DELETE FROM audit_log')).rejects.toThrow(/append-only/);
  });
});
