// Alerts by e-mail, once per crossing: an account's balance falling below 20% and then 5% of its last
// top-up (to its owners and billing members), a key's spend reaching 80% and then 100% of its
// lifetime or monthly cap (to its owners and admins, and the member who made the key), a team's spend
// reaching 80% and 100% of its budgets (to the owners and admins), and a member's spend (of the keys
// they made) reaching 80% and 100% of their budgets (to the owners and admins, and the member). A pass compares
// the record's figures with the thresholds; a crossing is remembered (alert_crossings) so it mails
// once, and forgotten when the figure is back on the safe side (a top-up, a raised cap, a new month for
// monthly caps), so the next crossing mails again.
import { formatUsd } from '../billing/money.js';
import { utcMonth } from '../billing/month.js';
import type { Database, Queryable } from '../record/database.js';
import { memberEmailsWith } from './memberships.js';
import type { Permission } from './roles.js';
import { enqueueEmail } from './outbox.js';

interface Crossing {
  subject: string;
  kind: string;
  crossed: boolean;
  accountId: string;
  /** Who hears of it: the members whose role has this permission (roles.ts)... */
  audience: Extract<Permission, 'billing.manage' | 'keys.all' | 'teams.manage' | 'budgets.manage'>;
  /** ...and this member too (the key's maker), if any. */
  alsoTo?: string;
  title: string;
  text: string;
}

async function mailCrossing(tx: Queryable, c: Crossing): Promise<void> {
  const to = new Set(await memberEmailsWith(tx, c.accountId, c.audience));
  if (c.alsoTo !== undefined) to.add(c.alsoTo);
  for (const address of to) await enqueueEmail(tx, { to: address, subject: c.title, text: c.text });
}

/** One pass; the number of alerts mailed. */
export async function checkAlerts(db: Database, now = new Date()): Promise<number> {
  const crossings: Crossing[] = [];
  const balances = await db.query<{ account_id: string; balance: number; last_top_up: number }>(
    'SELECT account_id, balance, last_top_up FROM account_totals WHERE last_top_up > 0',
  );
  for (const b of balances.rows) {
    for (const pct of [20, 5]) {
      const threshold = Math.floor((Number(b.last_top_up) * pct) / 100);
      crossings.push({
        subject: b.account_id,
        kind: `balance_below_${pct}`,
        crossed: Number(b.balance) < threshold,
        accountId: b.account_id,
        audience: 'billing.manage',
        title: `Your Tollgate balance is below ${pct}% of your last top-up`,
        text: `Your balance is ${formatUsd(Number(b.balance))} USD, below ${pct}% of your last top-up (${formatUsd(Number(b.last_top_up))} USD). Top up on the Balance page to keep your keys working.`,
      });
    }
  }
  const month = utcMonth(now.getTime());
  const keys = await db.query<{ id: string; account_id: string; name: string; lifetime_cap: number | null; monthly_cap: number | null; lifetime_spent: number; month_spent: number; owner_email: string | null }>(
    `SELECT k.id, k.account_id, k.name, k.lifetime_cap, k.monthly_cap, k.lifetime_spent, COALESCE(s.spent, 0) AS month_spent, o.email AS owner_email
       FROM api_keys k LEFT JOIN key_month_spend s ON s.key_id = k.id AND s.month = $1 LEFT JOIN dashboard_users o ON o.id = k.owner_user_id
      WHERE k.revoked_at IS NULL AND (k.lifetime_cap IS NOT NULL OR k.monthly_cap IS NOT NULL)`,
    [month],
  );
  for (const k of keys.rows) {
    for (const [which, cap, spent, suffix] of [
      ['lifetime', k.lifetime_cap, Number(k.lifetime_spent), ''],
      ['monthly', k.monthly_cap, Number(k.month_spent), `:${month}`],
    ] as const) {
      if (cap === null) continue;
      for (const pct of [80, 100]) {
        crossings.push({
          subject: k.id,
          kind: `${which}_cap_${pct}${suffix}`,
          // Integer compare: spent / cap >= pct / 100.
          crossed: spent * 100 >= Number(cap) * pct,
          accountId: k.account_id,
          audience: 'keys.all',
          ...(k.owner_email === null ? {} : { alsoTo: k.owner_email }),
          title: `Key "${k.name}" has used ${pct}% of its ${which} cap`,
          text: `Key "${k.name}" has spent ${formatUsd(spent)} USD of its ${which} cap of ${formatUsd(Number(cap))} USD${pct === 100 ? ': requests with it are refused (402) until the cap is raised' : ''}.`,
        });
      }
    }
  }
  crossings.push(...(await budgetCrossings(db, month)));
  let mailed = 0;
  for (const c of crossings) {
    if (!c.crossed) {
      await db.query('DELETE FROM alert_crossings WHERE subject = $1 AND kind = $2', [c.subject, c.kind]);
      continue;
    }
    await db.transaction(async (tx) => {
      const fresh = await tx.query('INSERT INTO alert_crossings (subject, kind) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING kind', [c.subject, c.kind]);
      if (fresh.rows.length === 0) return;
      await mailCrossing(tx, c);
      mailed++;
    });
  }
  return mailed;
}

/** A budget's spend (committed, as the record has it) against its 80% and 100% marks, this month's and over its life. */
function budgetMarks(
  b: { lifetime_budget: number | null; monthly_budget: number | null; lifetime_spent: number; month_spent: number },
  month: string,
  crossing: (which: 'lifetime' | 'monthly', pct: number, spent: number, budget: number, suffix: string) => Crossing,
): Crossing[] {
  const out: Crossing[] = [];
  for (const [which, budget, spent, suffix] of [
    ['lifetime', b.lifetime_budget, Number(b.lifetime_spent), ''],
    ['monthly', b.monthly_budget, Number(b.month_spent), `:${month}`],
  ] as const) {
    if (budget === null) continue;
    for (const pct of [80, 100]) out.push(crossing(which, pct, spent, Number(budget), suffix));
  }
  return out;
}

/** Teams' budgets (to the owners and admins) and members' budgets (to them too, and to the member). */
async function budgetCrossings(db: Queryable, month: string): Promise<Crossing[]> {
  const crossings: Crossing[] = [];
  const teams = await db.query<{ id: string; account_id: string; name: string; lifetime_budget: number | null; monthly_budget: number | null; lifetime_spent: number; month_spent: number }>(
    `SELECT t.id, t.account_id, t.name, t.lifetime_budget, t.monthly_budget, t.lifetime_spent, COALESCE(s.spent, 0) AS month_spent
       FROM teams t LEFT JOIN team_month_spend s ON s.team_id = t.id AND s.month = $1
      WHERE t.deleted_at IS NULL AND (t.lifetime_budget IS NOT NULL OR t.monthly_budget IS NOT NULL)`,
    [month],
  );
  for (const t of teams.rows) {
    crossings.push(
      ...budgetMarks(t, month, (which, pct, spent, budget, suffix) => ({
        subject: `team:${t.id}`,
        kind: `${which}_budget_${pct}${suffix}`,
        // Integer compare: spent / budget >= pct / 100.
        crossed: spent * 100 >= budget * pct,
        accountId: t.account_id,
        audience: 'teams.manage',
        title: `The ${t.name} team has used ${pct}% of its ${which} budget`,
        text: `The ${t.name} team's keys have spent ${formatUsd(spent)} USD of its ${which} budget of ${formatUsd(budget)} USD${pct === 100 ? ': their requests are refused (402) until the budget is raised on the Teams page' : ''}.`,
      })),
    );
  }
  const members = await db.query<{ account_id: string; user_id: string; email: string; lifetime_budget: number | null; monthly_budget: number | null; lifetime_spent: number; month_spent: number }>(
    `SELECT b.account_id, b.user_id, u.email, b.lifetime_budget, b.monthly_budget,
            COALESCE((SELECT sum(k.lifetime_spent) FROM api_keys k WHERE k.account_id = b.account_id AND k.owner_user_id = b.user_id), 0)::bigint AS lifetime_spent,
            COALESCE((SELECT sum(s.spent) FROM api_keys k JOIN key_month_spend s ON s.key_id = k.id AND s.month = $1
                       WHERE k.account_id = b.account_id AND k.owner_user_id = b.user_id), 0)::bigint AS month_spent
       FROM member_budgets b JOIN dashboard_users u ON u.id = b.user_id
       JOIN account_memberships m ON m.account_id = b.account_id AND m.user_id = b.user_id
      WHERE b.lifetime_budget IS NOT NULL OR b.monthly_budget IS NOT NULL`,
    [month],
  );
  for (const m of members.rows) {
    crossings.push(
      ...budgetMarks(m, month, (which, pct, spent, budget, suffix) => ({
        subject: `member:${m.account_id}:${m.user_id}`,
        kind: `${which}_budget_${pct}${suffix}`,
        crossed: spent * 100 >= budget * pct,
        accountId: m.account_id,
        audience: 'budgets.manage',
        alsoTo: m.email,
        title: `${m.email} has used ${pct}% of their ${which} budget`,
        text: `The keys ${m.email} made have spent ${formatUsd(spent)} USD of their ${which} budget of ${formatUsd(budget)} USD${pct === 100 ? ': their requests are refused (402) until an owner or admin raises it on the Members page' : ''}.`,
      })),
    );
  }
  return crossings;
}
