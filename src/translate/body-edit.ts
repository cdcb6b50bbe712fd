// Same-format pairs send the client's own bytes upstream with a few top-level members replaced (the
// model, the output limit, stream options) instead of serialising the parsed body again: an agent's
// 300 KB request is copied, not stringified. Where the members sit was recorded while the body was read
// (decode/json-body.ts), so editing touches only those few members. Hand-written because no JSON
// library edits text in place, and what is needed is narrow: the top-level members of a body
// JSON.parse has already accepted.
import type { ClientBody, MemberSpan } from '../request/client-body.js';


const OPEN = Buffer.from('{');
const CLOSE = Buffer.from('}');
const COMMA = Buffer.from(',');

/** The key of a member span, as JSON.parse reads it. */
function keyOf(bytes: Buffer, span: MemberSpan): string {
  const raw = bytes.toString('utf8', span.start + 1, span.keyEnd);
  return raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw;
}

/**
 * The body with each top-level member named in `set` replaced where it first stands (later copies of
 * a key sent twice are removed), the members whose `set` value is undefined removed, and the `set`
 * members the body lacked appended in `set`'s order. Every other member keeps its bytes and its place.
 */
export function editTopLevel(body: ClientBody, set: Readonly<Record<string, unknown>>): Buffer {
  const { bytes } = body;
  const parts: Buffer[] = [];
  const written = new Set<string>();
  let first = true;
  const member = (text: Buffer | string): void => {
    if (!first) parts.push(COMMA);
    parts.push(typeof text === 'string' ? Buffer.from(text) : text);
    first = false;
  };
  // Runs of kept members are copied as one slice, commas and all.
  let runStart = -1;
  let runEnd = -1;
  const endRun = (): void => {
    if (runStart >= 0) member(bytes.subarray(runStart, runEnd));
    runStart = -1;
  };
  for (const span of body.members) {
    const key = keyOf(bytes, span);
    if (!Object.hasOwn(set, key)) {
      if (runStart < 0) runStart = span.start;
      runEnd = span.end;
      continue;
    }
    endRun();
    const value = set[key];
    if (value !== undefined && !written.has(key)) member(`${JSON.stringify(key)}:${JSON.stringify(value)}`);
    written.add(key);
  }
  endRun();
  for (const [key, value] of Object.entries(set)) if (value !== undefined && !written.has(key)) member(`${JSON.stringify(key)}:${JSON.stringify(value)}`);
  return Buffer.concat([OPEN, ...parts, CLOSE]);
}
