// The dashboard's own refusal: a status and a message the person (or script) can act on. Its own class
// (not just ClientError), so a form that re-renders itself on its own errors lets other apps' through.
import { ClientError } from '../http/client-error.js';

export class DashboardError extends ClientError {}
