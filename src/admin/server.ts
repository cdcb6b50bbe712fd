// Starts the admin API on its own port (never on the public gateway port).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdminApp, type AdminApiOptions } from './admin-api.js';

export async function startAdminServer(opts: AdminApiOptions, port: number, host: string): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer(createAdminApp(opts).callback());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${host}:${address.port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
