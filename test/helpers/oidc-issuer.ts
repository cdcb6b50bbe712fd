// A real OpenID provider for the tests: the `oidc-provider` package on a loopback port, with one
// confidential client (the dashboard), people whose claims the test sets (e-mail and groups, put in the
// ID token), its development login form (any login name is that person; no consent step for our
// client), and RS256 keys the test holds.
//
// What the provider will not do on its own, the test makes it do in the open:
//  - rotate(): a new provider instance on the same port whose JWKS lists a new key first (it signs with
//    it, a new kid) and the old one after it, as a provider rotating its keys publishes them;
//  - tamper: a post-middleware on the provider's own token endpoint rewrites the ID token it just
//    issued, with its claims changed (another audience, an expiry in the past) and re-signed with the
//    provider's own signing key, or (forged) signed with a key the provider never published under the
//    same kid. The rest of the answer, and everything else the provider does, is untouched.
import { createPrivateKey, createSign, generateKeyPairSync, randomBytes, type JsonWebKey } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import Provider, { type KoaLikeContext } from 'oidc-provider';
import { freePort } from './redis-server.js';

export interface Person {
  email: string;
  groups: string[];
  emailVerified?: boolean;
}

export type Tamper = 'none' | 'wrong-audience' | 'expired' | 'forged-signature';

interface SigningKey {
  kid: string;
  jwk: JsonWebKey & { kid: string; alg: string; use: string };
}

function newKey(): SigningKey {
  const kid = `k-${randomBytes(6).toString('hex')}`;
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { kid, jwk: { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' } };
}

const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');

function sign(header: Record<string, unknown>, payload: Record<string, unknown>, jwk: JsonWebKey): string {
  const input = `${b64(header)}.${b64(payload)}`;
  const signature = createSign('RSA-SHA256').update(input).sign(createPrivateKey({ key: jwk, format: 'jwk' }));
  return `${input}.${signature.toString('base64url')}`;
}

function decode(jwt: string): { header: Record<string, unknown>; payload: Record<string, unknown> } {
  const [h, p] = jwt.split('.');
  return { header: JSON.parse(Buffer.from(h ?? '', 'base64url').toString()) as Record<string, unknown>, payload: JSON.parse(Buffer.from(p ?? '', 'base64url').toString()) as Record<string, unknown> };
}

export interface TestIssuer {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** The people by login name (the subject); change them between sign-ins. */
  people: Map<string, Person>;
  tamper: Tamper;
  /** The kid of the last ID token the provider issued (after any tampering). */
  lastKid?: string;
  /** The kid the provider signs with now. */
  readonly signingKid: string;
  /** A new signing key first in the JWKS, the old one kept after it. */
  rotate(): void;
  close(): Promise<void>;
}

export async function startTestIssuer(opts: { redirectUri: string; clientId?: string }): Promise<TestIssuer> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const clientId = opts.clientId ?? 'tollgate-dashboard';
  const clientSecret = randomBytes(24).toString('base64url');
  const cookieKeys = [randomBytes(24).toString('hex')];
  let keys: SigningKey[] = [newKey()];
  let handler: (req: IncomingMessage, res: ServerResponse) => void;

  const state: TestIssuer = {
    issuer,
    clientId,
    clientSecret,
    people: new Map(),
    tamper: 'none',
    get signingKid() {
      return (keys[0] as SigningKey).kid;
    },
    rotate() {
      keys = [newKey(), ...keys];
      handler = build().callback();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };

  function build(): Provider {
    const provider = new Provider(issuer, {
      clients: [{ client_id: clientId, client_secret: clientSecret, redirect_uris: [opts.redirectUri], grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic' }],
      jwks: { keys: keys.map((k) => k.jwk) },
      cookies: { keys: cookieKeys },
      claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'] },
      // The claims of the scopes asked for go in the ID token itself (the dashboard reads only it).
      conformIdTokenClaims: false,
      features: { devInteractions: { enabled: true } },
      pkce: { required: () => true },
      findAccount: (_ctx: unknown, sub: string) => {
        const person = state.people.get(sub);
        if (person === undefined) return undefined;
        return { accountId: sub, claims: () => ({ sub, email: person.email, email_verified: person.emailVerified ?? true, groups: person.groups }) };
      },
      // Our client is first-party: no consent step.
      loadExistingGrant: async (ctx: KoaLikeContext) => {
        const oidc = ctx.oidc;
        if (oidc?.client === undefined || oidc.session === undefined) return undefined;
        const grantId = oidc.result?.consent?.grantId ?? oidc.session.grantIdFor(oidc.client.clientId);
        if (grantId !== undefined) return oidc.provider.Grant.find(grantId);
        const grant = new oidc.provider.Grant({ clientId: oidc.client.clientId, accountId: oidc.session.accountId });
        grant.addOIDCScope('openid email profile groups');
        grant.addOIDCClaims(['email', 'email_verified', 'groups']);
        await grant.save();
        return grant;
      },
      ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 3600, Grant: 3600 },
    });
    provider.use(async (ctx, next) => {
      await next();
      if (ctx.oidc?.route !== 'token' || typeof ctx.body !== 'object' || ctx.body === null) return;
      const body = ctx.body as Record<string, unknown>;
      if (typeof body.id_token !== 'string') return;
      const { header, payload } = decode(body.id_token);
      const now = Math.floor(Date.now() / 1000);
      const signing = keys[0] as SigningKey;
      let idToken = body.id_token;
      if (state.tamper === 'wrong-audience') idToken = sign(header, { ...payload, aud: 'another-application' }, signing.jwk);
      if (state.tamper === 'expired') idToken = sign(header, { ...payload, iat: now - 3600, exp: now - 600 }, signing.jwk);
      if (state.tamper === 'forged-signature') idToken = sign(header, { ...payload }, newKey().jwk);
      body.id_token = idToken;
      state.lastKid = String(decode(idToken).header.kid);
    });
    return provider;
  }

  handler = build().callback();
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return state;
}
