// The cost written into an upstream event's own JSON text: same-format streams forward the upstream's
// bytes, so the one change their final usage event gets is `,"cost":<usd>` inserted before the closing
// brace of its top-level `usage` object. Everything else keeps its bytes. The top-level members are
// found by the same scanner that locates a request body's members (decode/json-body.ts).
import { JsonDepthGauge, MAX_JSON_DEPTH } from '../decode/json-body.js';
import { isRecord, type JsonObject } from '../wire/json-shape.js';
import { withCost } from '../wire/usage-cost.js';

const USAGE_KEY = '"usage"';
const SPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * `text` (the JSON of `parsed`, an event with a `usage` object) with the cost in that object. Text whose
 * usage cannot be edited in place (a cost already there, a key spelled with escapes) is serialised anew
 * from `parsed` with the cost set, so the client never gets two `cost` members.
 */
export function insertUsageCost(text: string, parsed: JsonObject, costUsd: number): string {
  const usage = parsed.usage;
  if (!isRecord(usage)) return text;
  const anew = (): string => {
    withCost(usage, costUsd);
    return JSON.stringify(parsed);
  };
  if (Object.hasOwn(usage, 'cost')) return anew();
  const bytes = Buffer.from(text, 'utf8');
  const gauge = new JsonDepthGauge(MAX_JSON_DEPTH);
  if (!gauge.feed(bytes)) return anew();
  const span = gauge.members.find((m) => bytes.toString('utf8', m.start, m.keyEnd + 1) === USAGE_KEY);
  if (span === undefined) return anew();
  // The value's closing brace: the last non-space byte of the member.
  let close = span.end - 1;
  while (close > span.keyEnd && SPACE.has(bytes[close] as number)) close--;
  if (bytes[close] !== 0x7d) return anew();
  let before = close - 1;
  while (before > span.keyEnd && SPACE.has(bytes[before] as number)) before--;
  const member = `${bytes[before] === 0x7b ? '' : ','}"cost":${JSON.stringify(costUsd)}`;
  return bytes.toString('utf8', 0, close) + member + bytes.toString('utf8', close);
}
