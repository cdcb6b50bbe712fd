// What the two test-mode payment fakes share: a loopback HTTP server, body reading, a signed webhook
// sender that retries like the real providers (a failed delivery is sent again), and a tiny page.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  url: string;
  body: string;
  headers: Record<string, string>;
  /** HTTP status of each attempt; 0 when the connection failed. */
  attempts: number[];
}

export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

export function sendPage(res: ServerResponse, title: string, body: string): void {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${title}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:2rem auto;padding:0 1rem}.test{background:#fff3cd;padding:.5rem;border-left:4px solid #c9a000}
button{font:inherit;padding:.5rem 1rem;margin:.25rem 0;cursor:pointer;display:block}</style></head><body>
<p class="test" role="note">Test mode: no real money moves. This page stands in for the payment provider.</p>${body}</body></html>`);
}

export function escape(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export async function listen(handler: (req: IncomingMessage, res: ServerResponse) => Promise<void>, port = 0, host = '127.0.0.1'): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    handler(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: err instanceof Error ? err.message : String(err) } });
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return { server, url: `http://${host}:${(server.address() as AddressInfo).port}` };
}

export function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** Posts a webhook until it is answered 2xx or `tries` attempts are spent (redeliveries). */
export async function deliver(d: Delivery, tries = 4, pauseMs = 200): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    let status = 0;
    try {
      const res = await fetch(d.url, { method: 'POST', headers: { 'content-type': 'application/json', ...d.headers }, body: d.body, signal: AbortSignal.timeout(10_000) });
      status = res.status;
      await res.arrayBuffer();
    } catch {
      status = 0;
    }
    d.attempts.push(status);
    if (status >= 200 && status < 300) return true;
    await new Promise((r) => setTimeout(r, pauseMs * (i + 1)));
  }
  return false;
}
