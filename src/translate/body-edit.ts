// Same-format pairs send the client's own bytes upstream with a few top-level members replaced (the
// model, the output limit, stream options) instead of serialising the parsed body again: an agent's
// 300 KB request is copied, not stringified. Where the members sit was recorded while the body was read
// (decode/json-body.ts), so editing touches only those few members. Hand-written because no JSON
// library edits text in place, and what is needed is narrow: the top-level members of a body
// JSON.parse has already accepted.
import type { ClientBody, MemberSpan } from '../request/client-body.js';


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
  // The members in order: byte ranges of the client's body (runs of kept members, copied as one slice,
  // commas and all) or replacement texts. The result is sized first and written once: no buffer per
  // replaced member, none per comma, and no copy by a concatenation.
  const pieces: (string | number)[] = [];
  let size = 2;
  let written: string[] | undefined;
  const add = (text: string): void => {
    size += (pieces.length > 0 ? 1 : 0) + Buffer.byteLength(text);
    pieces.push(text);
  };
  let runStart = -1;
  let runEnd = -1;
  const endRun = (): void => {
    if (runStart < 0) return;
    size += (pieces.length > 0 ? 1 : 0) + (runEnd - runStart);
    pieces.push(runStart, runEnd);
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
    if (value !== undefined && written?.includes(key) !== true) add(`${JSON.stringify(key)}:${JSON.stringify(value)}`);
    (written ??= []).push(key);
  }
  endRun();
  for (const key in set) {
    const value = set[key];
    if (Object.hasOwn(set, key) && value !== undefined && written?.includes(key) !== true) add(`${JSON.stringify(key)}:${JSON.stringify(value)}`);
  }
  const out = Buffer.allocUnsafe(size);
  out[0] = 0x7b;
  let at = 1;
  for (let i = 0; i < pieces.length; i++) {
    if (at > 1) out[at++] = 0x2c;
    const piece = pieces[i] as string | number;
    if (typeof piece === 'string') at += out.write(piece, at, 'utf8');
    else at += bytes.copy(out, at, piece, pieces[++i] as number);
  }
  out[at] = 0x7d;
  return out;
}
