// Starts the admin API on its own port (never on the public gateway port).
import { listenApp, type Listening } from '../http/listen.js';
import { createAdminApp, type AdminApiOptions } from './admin-api.js';

export function startAdminServer(opts: AdminApiOptions, port: number, host: string): Promise<Listening> {
  return listenApp(createAdminApp(opts), port, host);
}
