// Starts the dashboard on its own port (never the gateway's): its own Service and Ingress in a cluster.
import { listenApp, type Listening } from '../http/listen.js';
import { createDashboardApp, type DashboardAppOptions } from './app.js';

export function startDashboard(opts: DashboardAppOptions, port: number, host: string): Promise<Listening> {
  return listenApp(createDashboardApp(opts), port, host);
}
