// Reading a small request body for the apps (admin API, dashboard): the bytes up to a limit, and a
// JSON object. Each app words the refusals for its own reader; the rules are the same.
import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';
import { ClientError } from './client-error.js';

export interface BodyRefusals {
  tooLarge: string;
  unreadable: string;
  notJson: string;
  notObject: string;
}

/** The body as UTF-8 text, at most `limit` bytes; a body too large, aborted or mis-encoded is a ClientError. */
export async function readBodyText(req: IncomingMessage, limit: number, words: BodyRefusals): Promise<string> {
  try {
    return await getRawBody(req, { limit, encoding: 'utf8' });
  } catch (err) {
    const status = (err as { status?: unknown } | null)?.status;
    if (status === 413) throw new ClientError(413, words.tooLarge);
    // The reader's own messages are not passed on: fixed texts only.
    throw new ClientError(typeof status === 'number' && status >= 400 && status < 500 ? status : 400, words.unreadable);
  }
}

/** A body that must be a JSON object (not an array, not a scalar). */
export function parseJsonObject(text: string, words: BodyRefusals): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Fixed text: the parser's message quotes the body back.
    throw new ClientError(400, words.notJson);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new ClientError(400, words.notObject);
  return parsed as Record<string, unknown>;
}
