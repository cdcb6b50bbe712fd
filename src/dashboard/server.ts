// Starts the dashboard on its own port (never the gateway's): its own Service and Ingress in a cluster.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createDashboardApp, type DashboardAppOptions } from './app.js';

export async function startDashboard(opts: DashboardAppOptions, port: number, host: string): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer(createDashboardApp(opts).callback());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${host}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
