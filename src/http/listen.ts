// A Koa app on its own port: the admin API and the dashboard each listen apart from the gateway.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';

export interface Listening {
  url: string;
  close(): Promise<void>;
}

export async function listenApp<S>(app: Koa<S>, port: number, host: string): Promise<Listening> {
  const server: Server = createServer(app.callback());
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
        // Keep-alive connections would hold close() open.
        server.closeAllConnections();
      }),
  };
}
