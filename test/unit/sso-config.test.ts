// SSO's settings are checked at start: each wrong one stops the start with a message that names the
// variable and says what is expected; unset issuer means SSO off. And the mapping gives each person
// the strongest role its rules name per organization.
import { describe, expect, it } from 'vitest';
import { readDashboardConfig } from '../../src/dashboard/config.js';
import { DEFAULT_SSO_SESSION_HOURS, readSsoConfig } from '../../src/dashboard/sso-config.js';
import { rolesFor } from '../../src/dashboard/sso-membership.js';

const GOOD = {
  DASHBOARD_SSO_ISSUER: 'https://login.example.com/realms/acme',
  DASHBOARD_SSO_CLIENT_ID: 'tollgate',
  DASHBOARD_SSO_CLIENT_SECRET: 's3cret-value',
  DASHBOARD_SSO_DOMAINS: 'Acme.com, @acme.co.uk',
  DASHBOARD_SSO_MAPPINGS: JSON.stringify([
    { domain: 'acme.com', organization: 'Acme', role: 'member' },
    { group: 'tollgate-admins', organization: 'Acme', role: 'admin' },
  ]),
};

describe('SSO settings', () => {
  it('off without an issuer; with one, defaults that are stated (8 h sessions, the groups claim, the callback under the public URL)', () => {
    expect(readSsoConfig({}, 'https://dash.example.com')).toBeUndefined();
    const c = readSsoConfig(GOOD, 'https://dash.example.com');
    expect(c?.redirectUrl.href).toBe('https://dash.example.com/sso/callback');
    expect(c?.domains).toEqual(['acme.com', 'acme.co.uk']);
    expect(c?.sessionTtlMs).toBe(DEFAULT_SSO_SESSION_HOURS * 3_600_000);
    expect(DEFAULT_SSO_SESSION_HOURS).toBe(8);
    expect(c?.groupsClaim).toBe('groups');
    expect(c?.ssoOnly).toBe(false);
    expect(c?.name).toBe('login.example.com');
    expect(c?.allowHttp).toBe(false);
    expect(readDashboardConfig({ ...GOOD, DASHBOARD_PUBLIC_URL: 'https://dash.example.com' }).sso?.clientId).toBe('tollgate');
  });

  it.each([
    [{ DASHBOARD_SSO_CLIENT_ID: '' }, /^DASHBOARD_SSO_CLIENT_ID: required/],
    [{ DASHBOARD_SSO_CLIENT_SECRET: undefined }, /^DASHBOARD_SSO_CLIENT_SECRET: required/],
    [{ DASHBOARD_SSO_ISSUER: 'http://login.example.com' }, /^DASHBOARD_SSO_ISSUER: must be https \(plain http only to a loopback address\)/],
    [{ DASHBOARD_SSO_ISSUER: 'not a url' }, /^DASHBOARD_SSO_ISSUER: must be an absolute URL/],
    [{ DASHBOARD_SSO_DOMAINS: ' , ' }, /^DASHBOARD_SSO_DOMAINS: name at least one e-mail domain/],
    [{ DASHBOARD_SSO_DOMAINS: 'acme.com, not a domain' }, /^DASHBOARD_SSO_DOMAINS: "not a domain" is not an e-mail domain/],
    [{ DASHBOARD_SSO_MAPPINGS: '{oops' }, /^DASHBOARD_SSO_MAPPINGS: is not JSON/],
    [{ DASHBOARD_SSO_MAPPINGS: '[]' }, /^DASHBOARD_SSO_MAPPINGS: the list must NOT have fewer than 1 items/],
    [{ DASHBOARD_SSO_MAPPINGS: '[{"group":"g","organization":"Acme","role":"king"}]' }, /^DASHBOARD_SSO_MAPPINGS: \/0\/role must be equal to one of the allowed values/],
    [{ DASHBOARD_SSO_MAPPINGS: '[{"organization":"Acme","role":"member"}]' }, /^DASHBOARD_SSO_MAPPINGS: .*must match exactly one schema in oneOf/],
    [{ DASHBOARD_SSO_MAPPINGS: '[{"domain":"other.com","organization":"Acme","role":"member"}]' }, /^DASHBOARD_SSO_MAPPINGS: domain other.com is not in DASHBOARD_SSO_DOMAINS/],
    [{ DASHBOARD_SSO_REDIRECT_URL: 'https://dash.example.com/callback' }, /^DASHBOARD_SSO_REDIRECT_URL: must end in \/sso\/callback/],
    [{ DASHBOARD_SSO_SESSION_TTL_HOURS: '0' }, /^DASHBOARD_SSO_SESSION_TTL_HOURS: must be a whole number of hours from 1 to 720/],
    [{ DASHBOARD_SSO_ONLY: 'maybe' }, /^DASHBOARD_SSO_ONLY: expected true or false/],
    [{ DASHBOARD_SSO_SCOPES: 'email profile' }, /^DASHBOARD_SSO_SCOPES: must include openid/],
  ])('refuses %j with a message that names the variable', (change, message) => {
    expect(() => readSsoConfig({ ...GOOD, ...change }, 'https://dash.example.com')).toThrow(message);
  });

  it('needs a redirect URL when the dashboard has no public URL; plain http is allowed to a loopback issuer', () => {
    expect(() => readSsoConfig(GOOD, undefined)).toThrow(/^DASHBOARD_SSO_REDIRECT_URL: required when DASHBOARD_PUBLIC_URL is unset/);
    expect(readSsoConfig({ ...GOOD, DASHBOARD_SSO_ISSUER: 'http://127.0.0.1:9000', DASHBOARD_SSO_REDIRECT_URL: 'http://127.0.0.1:8082/sso/callback' }, undefined)?.allowHttp).toBe(true);
  });

  it('the client secret never appears in a refusal', () => {
    try {
      readSsoConfig({ ...GOOD, DASHBOARD_SSO_MAPPINGS: 'x' }, 'https://dash.example.com');
    } catch (err) {
      expect((err as Error).message).not.toContain(GOOD.DASHBOARD_SSO_CLIENT_SECRET);
    }
  });
});

describe('the mapping', () => {
  const rules = readSsoConfig({ ...GOOD, DASHBOARD_SSO_MAPPINGS: JSON.stringify([...JSON.parse(GOOD.DASHBOARD_SSO_MAPPINGS), { group: 'finance', organization: 'Acme', role: 'billing' }, { group: 'contractors', organization: 'Partners', role: 'member' }]) }, 'https://dash.example.com')?.rules ?? [];

  it('gives the strongest role its rules name per organization, by domain and by group', () => {
    expect([...rolesFor(rules, 'ada@acme.com', [])]).toEqual([['Acme', 'member']]);
    expect([...rolesFor(rules, 'ada@ACME.com', ['finance'])]).toEqual([['Acme', 'billing']]);
    expect([...rolesFor(rules, 'ada@acme.com', ['finance', 'tollgate-admins'])]).toEqual([['Acme', 'admin']]);
    expect([...rolesFor(rules, 'cy@acme.co.uk', ['contractors'])]).toEqual([['Partners', 'member']]);
    expect(rolesFor(rules, 'cy@acme.co.uk', []).size).toBe(0);
  });
});
