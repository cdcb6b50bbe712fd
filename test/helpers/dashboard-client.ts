// A scripted dashboard user over real HTTP: keeps the session cookie like a browser, sends the CSRF
// token on API calls, and (optionally) logs every response body, so a test can check that no response
// carried a key secret except its one-time reveal.
import { expect } from 'vitest';

export interface SeenResponse {
  text: string;
  reveal: boolean;
}

export class DashboardClient {
  cookie: string | undefined;
  csrf = '';
  constructor(
    readonly base: () => string,
    readonly headers: Record<string, string> = {},
    private readonly seen: SeenResponse[] = [],
  ) {}
  async req(method: string, path: string, body?: Record<string, string> | object, opts: { form?: boolean; headers?: Record<string, string>; reveal?: boolean } = {}): Promise<{ status: number; text: string; json: () => unknown; res: Response }> {
    const headers: Record<string, string> = { ...this.headers, ...opts.headers };
    if (this.cookie !== undefined) headers.cookie = this.cookie;
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
    const set = res.headers.get('set-cookie');
    if (set !== null) {
      const m = /tg_session=([^;]*)/.exec(set);
      if (m) this.cookie = m[1] === '' ? undefined : `tg_session=${m[1]}`;
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
  }
}

