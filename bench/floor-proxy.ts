// The floor: the least a Node proxy can do. It parses the JSON body, rewrites the model and forwards
// the request with an undici pool, piping the response back. No auth, no metering, no translation.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

export interface FloorProxy {
  url: string;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts)));
    req.on('error', reject);
  });
}

/** `upstreamOrigin` is the simulator's origin; model `x` is forwarded as `sim-x`. */
export async function startFloorProxy(upstreamOrigin: string, port = 0): Promise<FloorProxy> {
  const pool = new Pool(upstreamOrigin, { connections: 256, pipelining: 1 });
  const server: Server = createServer((req, res) => {
    void (async () => {
      try {
        const body = JSON.parse((await readBody(req)).toString('utf8')) as { model?: string };
        body.model = `sim-${body.model ?? ''}`;
        const upstream = await pool.request({
          method: 'POST',
          path: req.url ?? '/',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        res.writeHead(upstream.statusCode, { 'content-type': String(upstream.headers['content-type'] ?? 'application/json') });
        upstream.body.pipe(res);
      } catch (err) {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: err instanceof Error ? err.message : String(err) } }));
      }
    })();
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pool.close();
    },
  };
}
