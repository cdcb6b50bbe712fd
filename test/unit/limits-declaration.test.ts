// The declaration of limits (src/limits/limits.ts) and what is derived from it: each row answers for
// itself in every place that names refusals (metrics, dashboard, client wording), the buckets the
// ledgers draw from follow it in order and never leave the account's hash tag, and the reserve script's
// reply is read by name, refusing a reason nobody declared.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { bucketHashes, bucketsHeld, bucketsOf, BUCKET_SLOTS, declaredBucketsLua, HELD_SEPARATOR, luaSlotName } from '../../src/billing/buckets.js';
import { decodeReserveReply } from '../../src/billing/script-replies.js';
import { admit } from '../../src/limits/admission.js';
import { KEY_REFUSALS, LIMIT_REASONS, LIMITS, REFUSAL_REASONS, refusalMetricLabel, type LimitSpec } from '../../src/limits/limits.js';

const specs: Array<[string, LimitSpec]> = LIMIT_REASONS.map((r) => [r, LIMITS[r]]);

describe('the limits declaration', () => {
  it('names every refusal once, with its own metric label; every limit has its own dashboard label', () => {
    expect(REFUSAL_REASONS).toEqual([...LIMIT_REASONS, ...Object.keys(KEY_REFUSALS)]);
    expect(new Set(REFUSAL_REASONS.map(refusalMetricLabel)).size).toBe(REFUSAL_REASONS.length);
    const labels = LIMIT_REASONS.map((r) => LIMITS[r].dashboardLabel);
    expect(new Set(labels).size).toBe(labels.length);
    for (const l of labels) expect(l).toMatch(/^refused: \S/);
  });

  it.each(specs)('%s answers in a status of its unit and words a person can act on', (_reason, spec) => {
    if (spec.unit === 'money') {
      expect(spec.status).toBe(402);
      const facts = { limit: '500.00', scopeName: 'search', accountName: 'Acme' };
      expect(spec.wording.refused(facts)).toMatch(/^[A-Z].*[^.]$/);
      expect(spec.wording.remedy).toMatch(/^[A-Z].*dashboard.*\.$/);
      // A budget names itself, its value and whose it is.
      if (spec.scope === 'team') expect(spec.wording.refused(facts)).toMatch(/^The search team's (monthly|lifetime) budget of 500\.00 USD /);
      if (spec.scope === 'member') expect(spec.wording.refused(facts)).toMatch(/^Your (monthly|lifetime) budget of 500\.00 USD in Acme /);
      if (spec.wording.usedUp !== undefined) expect(spec.wording.usedUp(facts)).toMatch(/^[A-Z].* is used up; .*\.$/);
      return;
    }
    expect(spec.status).toBe(429);
    const facts = { limit: 7, per: 'per minute', needed: 9, available: 2, retry: 'retry in 1.5 s', outputLimitField: 'max_tokens' };
    const sentence = spec.wording.refused(facts);
    expect(sentence).toMatch(/^This .*\.$/);
    expect(sentence).toContain('7');
    if (spec.wording.neverFits !== undefined) expect(spec.wording.neverFits(facts)).toMatch(/lower max_tokens/);
  });

  it('draws a request from one bucket per limit on its path, in declaration order, all named under the account', () => {
    const buckets = bucketsOf({ keyId: 'key_1', teamId: 'team_1', memberId: 'user_1' });
    expect(buckets.map((b) => b.reason)).toEqual(LIMIT_REASONS);
    // Relative names: the scripts put the account's hash tag in front, so no bucket can leave its slot.
    for (const name of bucketHashes(buckets)) expect(name).toMatch(/^(account|team:team_1|member:user_1|key:key_1|inflight:key_1)$/);
    // A key in no team, made by the operator (no owner): no team or member bucket on its path.
    expect(bucketsOf({ keyId: 'key_1' }).map((b) => b.reason)).toEqual(LIMIT_REASONS.filter((r) => LIMITS[r].scope === 'account' || LIMITS[r].scope === 'key'));
    const slots = bucketsHeld(buckets).split(HELD_SEPARATOR);
    expect(slots).toHaveLength(BUCKET_SLOTS.length * buckets.length);
    const reason = BUCKET_SLOTS.indexOf('reason');
    expect(buckets.map((_, i) => slots[i * BUCKET_SLOTS.length + reason])).toEqual(LIMIT_REASONS);
  });

  it("the scripts read a bucket's slots where buckets.ts writes them, by names declared once", () => {
    const prelude = declaredBucketsLua();
    expect(/^local SLOTS = (\d+)$/m.exec(prelude)?.[1]).toBe(String(BUCKET_SLOTS.length));
    const [, names = '', numbers = ''] = /^local (KIND, [A-Z0-9_, ]+) = ([\d, ]+)$/m.exec(prelude) ?? [];
    const camel = (name: string): string => name.toLowerCase().replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
    const positions = Object.fromEntries(names.split(', ').map((name, i) => [camel(name), Number(numbers.split(', ')[i])]));
    expect(positions).toEqual(Object.fromEntries(BUCKET_SLOTS.map((slot, i) => [slot, i + 1])));
    // The scripts name no slot of their own: every `d[o + NAME]` they read is one of these, and none
    // declares SLOTS or a slot's position again.
    const luaDir = new URL('../../src/billing/lua/', import.meta.url);
    const declaredNames = new Set(BUCKET_SLOTS.map(luaSlotName));
    const read = new Set<string>();
    for (const file of readdirSync(luaDir).filter((f) => f.endsWith('.lua'))) {
      const lua = readFileSync(new URL(file, luaDir), 'utf8');
      expect(lua, file).not.toMatch(/^local (SLOTS|KIND)\b/m);
      for (const m of lua.matchAll(/\+ ([A-Z][A-Z0-9_]*)\]/g)) read.add(m[1] as string);
    }
    expect(read.size).toBeGreaterThan(10);
    expect([...read].filter((name) => !declaredNames.has(name))).toEqual([]);
  });

  it("the declared buckets the scripts carry, completed with a request's ids, are the buckets of its path", () => {
    const declared = [...declaredBucketsLua().matchAll(/'([^']*)'/g)].map((m) => m[1] as string);
    const width = BUCKET_SLOTS.length;
    const slot = (name: (typeof BUCKET_SLOTS)[number]): number => BUCKET_SLOTS.indexOf(name);
    const names = [slot('at'), slot('limitAt'), slot('defaultAt')];
    // What buckets.lua does: a bucket whose scope has no id is off the path; a name gets the id of the scope after it.
    const complete = (ids: Record<string, string>): string[] => {
      const out: string[] = [];
      for (let o = 0; o < declared.length; o += width) {
        const bucket = declared.slice(o, o + width);
        const scope = bucket[slot('atId')] as string;
        if (scope !== '' && ids[scope] === '') continue;
        for (const at of names) {
          bucket[at] = `${bucket[at] as string}${ids[bucket[at + 1] as string] as string}`;
          bucket[at + 1] = '';
        }
        out.push(...bucket);
      }
      return out;
    };
    for (const path of [{ keyId: 'key_1' }, { keyId: 'key_1', teamId: 'team_1' }, { keyId: 'key_1', memberId: 'user_1' }, { keyId: 'key_1', teamId: 'team_1', memberId: 'user_1' }]) {
      const ids = { '': '', key: path.keyId, team: path.teamId ?? '', member: path.memberId ?? '' };
      expect(complete(ids)).toEqual(bucketsHeld(bucketsOf(path)).split(HELD_SEPARATOR));
    }
  });

  it('admits by one rule: units in declaration order, the least left binds, the first declared on a tie', () => {
    const money = (reason: 'insufficient_balance' | 'key_lifetime_cap_reached' | 'key_monthly_cap_reached', limit: number | undefined, used: number) => ({ reason, unit: 'money' as const, limit, used });
    const needs = { money: 50, requests: 1, tokens: 10, concurrent_requests: 1 };
    const rpm = { reason: 'rate_limit_requests' as const, unit: 'requests' as const, limit: 1, used: 1 };
    expect(admit([money('insufficient_balance', 100, 60), money('key_lifetime_cap_reached', 100, 60), rpm], needs)).toEqual({
      admitted: false, reason: 'insufficient_balance', needed: 50, available: 40, availableOverall: 40,
    });
    expect(admit([money('insufficient_balance', 100, 0), money('key_lifetime_cap_reached', undefined, 99), money('key_monthly_cap_reached', 70, 0), rpm], needs)).toEqual({
      admitted: false, reason: 'rate_limit_requests', needed: 1, available: 0, availableOverall: 70,
    });
    expect(admit([money('insufficient_balance', 100, 0), { ...rpm, used: 0 }], needs)).toEqual({ admitted: true, availableOverall: 100 });
  });

  it("reads the reserve script's reply by name, and refuses a reason nobody declared", () => {
    const buckets = bucketsOf({ keyId: 'k' });
    const figures = buckets.flatMap(() => [-1, 0]);
    expect(decodeReserveReply([0, 'key_monthly_cap_reached', 500, 20, 20, 1000, ...figures], buckets)).toMatchObject({
      kind: 'refused', reason: 'key_monthly_cap_reached', needed: 500, available: 20, availableOverall: 20, resetMs: 1000,
    });
    // After the figures, the names the refusal is worded with: the binding scope's and the account's.
    const teamPath = bucketsOf({ keyId: 'k', teamId: 't' });
    expect(decodeReserveReply([0, 'team_monthly_budget_reached', 500, 20, 20, 0, ...teamPath.flatMap(() => [-1, 0]), 'search', 'Acme'], teamPath)).toMatchObject({
      kind: 'refused', reason: 'team_monthly_budget_reached', scopeName: 'search', accountName: 'Acme',
    });
    expect(decodeReserveReply([0, 'unknown_key', 500, 0, 0], buckets)).toMatchObject({ kind: 'refused', reason: 'unknown_key', readings: [] });
    expect(decodeReserveReply([-2, 150], buckets)).toEqual({ kind: 'rebuilding', retryAfterMs: 150 });
    expect(() => decodeReserveReply([0, 'team_budget_reached', 1, 0, 0], buckets)).toThrow(/undeclared reason/);
  });
});
