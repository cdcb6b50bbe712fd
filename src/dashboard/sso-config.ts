// Single sign-on's settings, read from the environment once at start (the Helm chart sets them from
// dashboard.sso). Declared once as data (SSO_SETTINGS: the variable, what it means, its default), so
// the README, the chart and the start-up check read the same list. A wrong setting stops the start
// with a message that names the variable; SSO is off while DASHBOARD_SSO_ISSUER is unset.
import { Ajv } from 'ajv';
import { isMemberRole, MEMBER_ROLES, type MemberRole } from './roles.js';

/** One rule of the mapping: people in this group (or of this e-mail domain) belong to this organization in this role. */
export type SsoRule = ({ group: string } | { domain: string }) & { organization: string; role: MemberRole };

export interface SsoConfig {
  issuer: URL;
  clientId: string;
  clientSecret: string;
  /** On the sign-in page: "Sign in with <name>". */
  name: string;
  /** The provider sends the browser back here (registered at the provider as the redirect URI). */
  redirectUrl: URL;
  /** The e-mail domains the provider serves (lower case); an address outside them is refused. */
  domains: string[];
  /** Password sign-in, sign-up and password reset are refused for addresses of these domains. */
  ssoOnly: boolean;
  /** The ID token claim that lists the person's groups. */
  groupsClaim: string;
  scopes: string[];
  rules: SsoRule[];
  /** An SSO session's absolute life: a person the provider no longer lets in keeps no session longer. */
  sessionTtlMs: number;
  /** Plain http to the issuer: only to a loopback address (tests, a provider beside the pod). */
  allowHttp: boolean;
}

/** The variables, what each means, and its default (undefined: required once SSO is on). */
export const SSO_SETTINGS = {
  DASHBOARD_SSO_ISSUER: { helm: 'issuer', about: "the provider's issuer URL (discovery: <issuer>/.well-known/openid-configuration); unset: SSO off", default: undefined },
  DASHBOARD_SSO_CLIENT_ID: { helm: 'clientId', about: 'the client id registered at the provider', default: undefined },
  DASHBOARD_SSO_CLIENT_SECRET: { helm: 'existingSecret / clientSecretKey', about: 'the client secret (from a Secret)', default: undefined },
  DASHBOARD_SSO_NAME: { helm: 'name', about: 'the provider as the sign-in button names it', default: "the issuer's host" },
  DASHBOARD_SSO_REDIRECT_URL: { helm: 'redirectUrl', about: 'the redirect URI registered at the provider', default: '<DASHBOARD_PUBLIC_URL>/sso/callback' },
  DASHBOARD_SSO_DOMAINS: { helm: 'domains', about: 'the e-mail domains the provider serves, comma-separated', default: undefined },
  DASHBOARD_SSO_ONLY: { helm: 'ssoOnly', about: 'refuse password sign-in, sign-up and reset for those domains', default: 'false' },
  DASHBOARD_SSO_GROUPS_CLAIM: { helm: 'groupsClaim', about: "the ID token claim with the person's groups", default: 'groups' },
  DASHBOARD_SSO_SCOPES: { helm: 'scopes', about: 'scopes asked for, space-separated', default: 'openid email profile' },
  DASHBOARD_SSO_MAPPINGS: { helm: 'mappings', about: 'JSON list of {"group"|"domain", "organization", "role"}', default: undefined },
  DASHBOARD_SSO_SESSION_TTL_HOURS: { helm: 'sessionTtlHours', about: 'the life of a session opened through SSO', default: '8' },
} as const;

export const DEFAULT_SSO_SESSION_HOURS = 8;

const RULES_SCHEMA = {
  type: 'array',
  minItems: 1,
  items: {
    type: 'object',
    additionalProperties: false,
    required: ['organization', 'role'],
    oneOf: [{ required: ['group'] }, { required: ['domain'] }],
    properties: {
      group: { type: 'string', minLength: 1 },
      domain: { type: 'string', minLength: 3 },
      organization: { type: 'string', minLength: 1, maxLength: 100 },
      role: { enum: [...MEMBER_ROLES] },
    },
  },
} as const;

const validateRules = new Ajv({ allErrors: true, logger: false }).compile<SsoRule[]>(RULES_SCHEMA);

/** A wrong SSO setting: the start stops with this message. */
export class SsoConfigError extends Error {
  constructor(variable: keyof typeof SSO_SETTINGS, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'SsoConfigError';
  }
}

const DOMAIN = /^(?=.{3,190}$)([a-z0-9-]+\.)+[a-z0-9-]{2,}$/;
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

function required(env: Record<string, string | undefined>, name: keyof typeof SSO_SETTINGS): string {
  const v = env[name]?.trim() ?? '';
  if (v === '') throw new SsoConfigError(name, `required when DASHBOARD_SSO_ISSUER is set (${SSO_SETTINGS[name].about})`);
  return v;
}

function url(name: keyof typeof SSO_SETTINGS, v: string): URL {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new SsoConfigError(name, `must be an absolute URL, got ${JSON.stringify(v)}`);
  }
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && LOOPBACK.has(u.hostname))) {
    throw new SsoConfigError(name, `must be https (plain http only to a loopback address), got ${JSON.stringify(v)}`);
  }
  return u;
}

function domains(v: string): string[] {
  const list = v.split(',').map((d) => d.trim().toLowerCase().replace(/^@/, '')).filter((d) => d !== '');
  if (list.length === 0) throw new SsoConfigError('DASHBOARD_SSO_DOMAINS', 'name at least one e-mail domain, e.g. example.com');
  for (const d of list) if (!DOMAIN.test(d)) throw new SsoConfigError('DASHBOARD_SSO_DOMAINS', `${JSON.stringify(d)} is not an e-mail domain`);
  return list;
}

function rules(v: string, served: readonly string[]): SsoRule[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch {
    throw new SsoConfigError('DASHBOARD_SSO_MAPPINGS', 'is not JSON: give a list like [{"group":"tollgate-admins","organization":"Acme","role":"admin"},{"domain":"acme.com","organization":"Acme","role":"member"}]');
  }
  if (!validateRules(parsed)) {
    const where = (validateRules.errors ?? []).map((e) => `${e.instancePath || 'the list'} ${e.message ?? 'is wrong'}`).join('; ');
    throw new SsoConfigError('DASHBOARD_SSO_MAPPINGS', `${where} (each rule: "group" or "domain", "organization", and "role" one of ${MEMBER_ROLES.join(', ')})`);
  }
  return parsed.map((r) => {
    if (!isMemberRole(r.role)) throw new SsoConfigError('DASHBOARD_SSO_MAPPINGS', `role must be one of ${MEMBER_ROLES.join(', ')}`);
    if (!('domain' in r)) return r;
    const domain = r.domain.toLowerCase();
    if (!served.includes(domain)) throw new SsoConfigError('DASHBOARD_SSO_MAPPINGS', `domain ${domain} is not in DASHBOARD_SSO_DOMAINS (${served.join(', ')})`);
    return { ...r, domain };
  });
}

function hours(v: string | undefined): number {
  if (v === undefined || v.trim() === '') return DEFAULT_SSO_SESSION_HOURS;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 24 * 30) throw new SsoConfigError('DASHBOARD_SSO_SESSION_TTL_HOURS', `must be a whole number of hours from 1 to 720, got ${JSON.stringify(v)}`);
  return n;
}

function flag(v: string | undefined): boolean {
  if (v === undefined || v === '') return false;
  if (/^(1|true|yes|on)$/i.test(v)) return true;
  if (/^(0|false|no|off)$/i.test(v)) return false;
  throw new SsoConfigError('DASHBOARD_SSO_ONLY', `expected true or false, got ${JSON.stringify(v)}`);
}

/** The SSO settings, or undefined when DASHBOARD_SSO_ISSUER is unset; throws SsoConfigError on a wrong one. */
export function readSsoConfig(env: Record<string, string | undefined>, publicUrl: string | undefined): SsoConfig | undefined {
  const issuerText = env.DASHBOARD_SSO_ISSUER?.trim() ?? '';
  if (issuerText === '') return undefined;
  const issuer = url('DASHBOARD_SSO_ISSUER', issuerText);
  const redirectText = env.DASHBOARD_SSO_REDIRECT_URL?.trim() || (publicUrl === undefined ? '' : `${publicUrl.replace(/\/$/, '')}/sso/callback`);
  if (redirectText === '') throw new SsoConfigError('DASHBOARD_SSO_REDIRECT_URL', 'required when DASHBOARD_PUBLIC_URL is unset (the address the provider sends browsers back to, ending in /sso/callback)');
  const redirectUrl = url('DASHBOARD_SSO_REDIRECT_URL', redirectText);
  if (redirectUrl.pathname !== '/sso/callback') throw new SsoConfigError('DASHBOARD_SSO_REDIRECT_URL', `must end in /sso/callback (the dashboard's route), got ${JSON.stringify(redirectText)}`);
  const served = domains(required(env, 'DASHBOARD_SSO_DOMAINS'));
  const scopes = (env.DASHBOARD_SSO_SCOPES?.trim() || 'openid email profile').split(/\s+/);
  if (!scopes.includes('openid')) throw new SsoConfigError('DASHBOARD_SSO_SCOPES', 'must include openid');
  return {
    issuer,
    clientId: required(env, 'DASHBOARD_SSO_CLIENT_ID'),
    clientSecret: required(env, 'DASHBOARD_SSO_CLIENT_SECRET'),
    name: env.DASHBOARD_SSO_NAME?.trim() || issuer.host,
    redirectUrl,
    domains: served,
    ssoOnly: flag(env.DASHBOARD_SSO_ONLY),
    groupsClaim: env.DASHBOARD_SSO_GROUPS_CLAIM?.trim() || 'groups',
    scopes,
    rules: rules(required(env, 'DASHBOARD_SSO_MAPPINGS'), served),
    sessionTtlMs: hours(env.DASHBOARD_SSO_SESSION_TTL_HOURS) * 3_600_000,
    allowHttp: issuer.protocol === 'http:',
  };
}

/** The domain of an address (lower case). */
export const domainOf = (email: string): string => email.slice(email.lastIndexOf('@') + 1).toLowerCase();
