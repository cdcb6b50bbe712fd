// The company's OpenID provider as openid-client sees it: discovery from the issuer, the authorization
// URL (code flow with PKCE, state and nonce), and the code exchanged for an ID token that openid-client
// verifies: issuer, audience, expiry, nonce, and (non-repudiation checks on) its signature against the
// provider's JWKS. Every failure becomes an SsoRefusal that says what was wrong, in words.
//
// Key rotation: oauth4webapi refetches the JWKS for an unknown kid only when its copy is a minute old
// or more, so a sign-in just after a rotation would fail. Each sign-in therefore verifies with a fresh
// Configuration whose JWKS cache is seeded from the last one dated at least a minute back: a known kid
// is served from the copy (up to its five-minute life), an unknown kid always fetches the set again.
// The ID token comes straight from the token endpoint, never from the browser, so an unknown kid
// cannot be sent by an attacker to make us fetch in a loop.
import * as oidc from 'openid-client';
import type { SsoConfig } from './sso-config.js';

/** What the provider vouched for, read from the verified ID token. */
export interface SsoClaims {
  issuer: string;
  subject: string;
  email?: string;
  /** false only when the provider said so; absent claims count as not denied (Entra ID sends none). */
  emailVerified?: boolean;
  groups: string[];
}

/** A refused SSO sign-in: the HTTP status and the reason for the person (no secret, no token). */
export class SsoRefusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'SsoRefusal';
  }
}

/** The per-sign-in secrets that must come back with the callback. */
export interface SsoChecks {
  state: string;
  nonce: string;
  codeVerifier: string;
}

const DISCOVERY_LIFE_MS = 60 * 60_000;
const HTTP_TIMEOUT_S = 10;

export class SsoProvider {
  private discovered?: { at: number; metadata: oidc.ServerMetadata; auth: oidc.ClientAuth };
  private jwks?: oidc.ExportedJWKSCache;

  constructor(private readonly config: SsoConfig) {}

  /** Discovery (again after an hour, or after a failure): the provider's endpoints and keys' address. */
  private async metadata(): Promise<{ metadata: oidc.ServerMetadata; auth: oidc.ClientAuth }> {
    if (this.discovered !== undefined && Date.now() - this.discovered.at < DISCOVERY_LIFE_MS) return this.discovered;
    let found: oidc.Configuration;
    try {
      found = await oidc.discovery(this.config.issuer, this.config.clientId, undefined, undefined, {
        timeout: HTTP_TIMEOUT_S,
        ...(this.config.allowHttp ? { execute: [oidc.allowInsecureRequests] } : {}),
      });
    } catch (err) {
      throw new SsoRefusal(502, `Tollgate could not read the sign-in provider's configuration at ${this.config.issuer.href} (${describe(err)}). Try again later, or tell the operator.`);
    }
    const metadata = found.serverMetadata();
    // Basic is the default the OpenID spec gives; a provider that lists only post gets post.
    const methods = metadata.token_endpoint_auth_methods_supported;
    const auth = methods === undefined || methods.includes('client_secret_basic') ? oidc.ClientSecretBasic(this.config.clientSecret) : oidc.ClientSecretPost(this.config.clientSecret);
    this.discovered = { at: Date.now(), metadata, auth };
    return this.discovered;
  }

  private async configuration(): Promise<oidc.Configuration> {
    const { metadata, auth } = await this.metadata();
    const config = new oidc.Configuration(metadata, this.config.clientId, undefined, auth);
    oidc.enableNonRepudiationChecks(config);
    if (this.config.allowHttp) oidc.allowInsecureRequests(config);
    config.timeout = HTTP_TIMEOUT_S;
    const now = Math.floor(Date.now() / 1000);
    if (this.jwks !== undefined && now - this.jwks.uat < 300) oidc.setJwksCache(config, { ...this.jwks, uat: Math.min(this.jwks.uat, now - 60) });
    return config;
  }

  /** Checks the configuration reaches the provider (at start, in the background). */
  async warmUp(): Promise<void> {
    await this.metadata();
  }

  /** New state, nonce and PKCE verifier, and the provider's URL to send the browser to. */
  async begin(): Promise<{ url: URL; checks: SsoChecks }> {
    const config = await this.configuration();
    const checks = { state: oidc.randomState(), nonce: oidc.randomNonce(), codeVerifier: oidc.randomPKCECodeVerifier() };
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: this.config.redirectUrl.href,
      scope: this.config.scopes.join(' '),
      response_type: 'code',
      state: checks.state,
      nonce: checks.nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(checks.codeVerifier),
      code_challenge_method: 'S256',
    });
    return { url, checks };
  }

  /** Exchanges the callback's code for the ID token, verifies it, and reads the claims. */
  async complete(query: URLSearchParams, checks: SsoChecks): Promise<SsoClaims> {
    const config = await this.configuration();
    // The configured redirect URI with the callback's parameters: never the request's Host header.
    const current = new URL(this.config.redirectUrl.href);
    current.search = query.toString();
    let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
    try {
      tokens = await oidc.authorizationCodeGrant(config, current, { pkceCodeVerifier: checks.codeVerifier, expectedState: checks.state, expectedNonce: checks.nonce, idTokenExpected: true });
    } catch (err) {
      throw refusalOf(err);
    } finally {
      const cache = oidc.getJwksCache(config);
      if (cache !== undefined) this.jwks = structuredClone(cache);
    }
    const claims = tokens.claims();
    if (claims === undefined) throw new SsoRefusal(401, 'The sign-in provider sent no ID token.');
    const groups = claims[this.config.groupsClaim];
    return {
      issuer: claims.iss,
      subject: claims.sub,
      ...(typeof claims.email === 'string' ? { email: claims.email } : {}),
      ...(typeof claims.email_verified === 'boolean' ? { emailVerified: claims.email_verified } : {}),
      groups: Array.isArray(groups) ? groups.filter((g): g is string => typeof g === 'string') : typeof groups === 'string' ? [groups] : [],
    };
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.cause instanceof Error ? `${err.message}: ${err.cause.message}` : err.message;
  return String(err);
}

const CLAIM_WORDS: Record<string, string> = {
  aud: 'it was issued for another application (wrong audience)',
  iss: 'it was issued by another provider (wrong issuer)',
  nonce: 'it does not belong to this sign-in (wrong nonce)',
  azp: 'it was issued to another application (wrong authorized party)',
};

/** openid-client's errors, as the reason the person is shown (never a token or the secret). */
export function refusalOf(err: unknown): SsoRefusal {
  const again = 'Start again from the sign-in page; if it keeps failing, tell the operator.';
  if (err instanceof oidc.AuthorizationResponseError) {
    if (err.error === 'access_denied') return new SsoRefusal(403, 'The sign-in provider did not let you in.');
    return new SsoRefusal(400, `The sign-in provider refused: ${err.error_description ?? err.error}. ${again}`);
  }
  if (err instanceof oidc.ResponseBodyError) {
    if (err.error === 'invalid_grant') return new SsoRefusal(400, `The sign-in provider refused the code (used already or expired). ${again}`);
    if (err.error === 'invalid_client') return new SsoRefusal(502, 'The sign-in provider does not accept Tollgate\'s client id or secret: tell the operator.');
    return new SsoRefusal(502, `The sign-in provider answered with an error (${err.error}). ${again}`);
  }
  if (err instanceof oidc.ClientError) {
    // openid-client wraps oauth4webapi's error, whose cause names the claim that failed.
    const inner = err.cause instanceof Error ? err.cause : err;
    const detail = inner.cause as { claim?: unknown } | undefined;
    const claim = typeof detail?.claim === 'string' ? detail.claim : undefined;
    if (err.code === 'OAUTH_JWT_CLAIM_COMPARISON_FAILED') {
      const words = (claim === undefined ? undefined : CLAIM_WORDS[claim]) ?? `its "${claim ?? 'claim'}" claim is wrong`;
      return new SsoRefusal(401, `The sign-in provider's ID token was refused: ${words}. ${again}`);
    }
    if (err.code === 'OAUTH_JWT_TIMESTAMP_CHECK_FAILED') return new SsoRefusal(401, `The sign-in provider's ID token was refused: it has expired (or is not valid yet). ${again}`);
    if (err.code === 'OAUTH_KEY_SELECTION_FAILED' || /signature/i.test(inner.message)) {
      return new SsoRefusal(401, `The sign-in provider's ID token was refused: its signature does not verify with the provider's published keys. ${again}`);
    }
    if (err.code === 'OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED' || /state/i.test(inner.message)) return new SsoRefusal(400, `The provider's answer does not belong to this sign-in. ${again}`);
    return new SsoRefusal(401, `The sign-in provider's answer was refused: ${inner.message}. ${again}`);
  }
  return new SsoRefusal(502, `Tollgate could not complete the sign-in with the provider (${describe(err)}). ${again}`);
}
