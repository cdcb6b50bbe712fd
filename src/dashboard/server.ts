// Starts the dashboard on its own port (never the gateway's): its own Service and Ingress in a cluster.
import { listenApp, type Listening } from '../http/listen.js';
import { createDashboardApp, type DashboardAppOptions } from './app.js';

export async function startDashboard(opts: DashboardAppOptions, port: number, host: string): Promise<Listening> {
  // Mailed links fall back to the address this server listens on (known once it listens), never the Host header.
  let own = '';
  const listening = await listenApp(createDashboardApp({ selfUrl: () => own, ...opts }), port, host);
  own = listening.url;
  return listening;
}
