// A scripted dashboard user over real HTTP: keeps the session cookie like a browser, sends the CSRF
// token on API calls, and (optionally) logs every response body, so a test can check that no response
// carried a key secret except its one-time reveal.
import { expect } from 'vitest';
import type { Database } from '../../src/record/database.js';

export interface SeenResponse {
  text: string;
  reveal: boolean;
}

export class DashboardClient {
  cookie: string | undefined;
  /** Cookies other than the session's (the one-time key reveal), name to value. */
  readonly others = new Map<string, string>();
  csrf = '';
  email = '';
  constructor(
    readonly base: () => string,
    readonly headers: Record<string, string> = {},
    private readonly seen: SeenResponse[] = [],
  ) {}
  async req(method: string, path: string, body?: Record<string, string> | object, opts: { form?: boolean; headers?: Record<string, string>; reveal?: boolean } = {}): Promise<{ status: number; text: string; json: () => unknown; res: Response }> {
    const headers: Record<string, string> = { ...this.headers, ...opts.headers };
    const jar = [...(this.cookie === undefined ? [] : [this.cookie]), ...[...this.others].map(([k, v]) => `${k}=${v}`)];
    if (jar.length > 0) headers.cookie = jar.join('; ');
    let payload: string | undefined;
    if (body !== undefined) {
      if (opts.form) {
        headers['content-type'] = 'application/x-www-form-urlencoded';
        payload = new URLSearchParams(body as Record<string, string>).toString();
      } else {
        headers['content-type'] = 'application/json';
        payload = JSON.stringify(body);
      }
    }
    const res = await fetch(this.base() + path, { method, headers, body: payload, redirect: 'manual' });
    for (const set of res.headers.getSetCookie()) {
      const m = /^([^=]+)=([^;]*)/.exec(set);
      if (!m) continue;
      const [, name = '', value = ''] = m;
      if (name === 'tg_session') this.cookie = value === '' ? undefined : `tg_session=${value}`;
      else if (value === '') this.others.delete(name);
      else this.others.set(name, value);
    }
    const text = await res.text();
    this.seen.push({ text: text + JSON.stringify([...res.headers]), reveal: opts.reveal === true });
    return { status: res.status, text, json: () => JSON.parse(text) as unknown, res };
  }
  api(method: string, path: string, body?: object, headers: Record<string, string> = {}): ReturnType<DashboardClient['req']> {
    return this.req(method, path, body, { headers: { 'x-csrf-token': this.csrf, ...headers } });
  }
  async signUp(email: string, password = 'correct horse battery'): Promise<void> {
    const r = await this.req('POST', '/api/sign-up', { email, password });
    expect(r.status).toBe(201);
    this.csrf = (r.json() as { csrf_token: string }).csrf_token;
    this.email = email.trim().toLowerCase();
  }

  /** The path of the newest confirmation link mailed to this client's address (read from the outbox). */
  static async confirmationPath(db: Database, email: string): Promise<string> {
    const mail = await db.query<{ body: string }>("SELECT body FROM email_outbox WHERE recipient = $1 AND subject LIKE 'Confirm%' ORDER BY id DESC LIMIT 1", [email]);
    const path = /https?:\/\/[^/\s]+(\/verify-email\/[A-Za-z0-9_-]{20,})/.exec(mail.rows[0]?.body ?? '')?.[1];
    expect(path, `a confirmation link mailed to ${email}`).toBeDefined();
    return path ?? '';
  }

  /** Follows the mailed confirmation link, as the holder would from their inbox. */
  async confirmEmail(db: Database): Promise<void> {
    const r = await this.req('GET', await DashboardClient.confirmationPath(db, this.email));
    expect(r.status).toBe(200);
  }

  /** Signs up and confirms the address (what a holder who can create keys has done). */
  async signUpConfirmed(db: Database, email: string, password = 'correct horse battery'): Promise<void> {
    await this.signUp(email, password);
    await this.confirmEmail(db);
  }
}

