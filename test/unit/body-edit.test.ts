// Same-format pairs edit the client's bytes: the members the body reader located, wherever its chunks
// were cut, and the edit, checked against JSON.parse on random objects in any layout.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JsonDepthGauge } from '../../src/decode/json-body.js';
import type { ClientBody } from '../../src/request/client-body.js';
import { editTopLevel } from '../../src/translate/body-edit.js';

function read(text: string, cuts: number[] = []): ClientBody {
  const bytes = Buffer.from(text, 'utf8');
  const gauge = new JsonDepthGauge(64);
  let from = 0;
  for (const cut of [...cuts.map((c) => c % (bytes.length + 1)).sort((a, b) => a - b), bytes.length]) {
    expect(gauge.feed(bytes.subarray(from, Math.max(from, cut)))).toBe(true);
    from = Math.max(from, cut);
  }
  return { bytes, members: gauge.members };
}

const layouts = [undefined, 2, '\t'] as const;

describe('the members of the top-level object, and editing them', () => {
  it('replaces exactly the named members and keeps every other one as it came', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 4 }), { maxKeys: 8 }),
        fc.constantFrom(...layouts),
        fc.array(fc.nat(), { maxLength: 6 }),
        fc.dictionary(fc.constantFrom('model', 'max_tokens', 'stream_options', 'a', ''), fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined })),
        (body, layout, cuts, set) => {
          const text = `  ${JSON.stringify(body, null, layout)}\n`;
          const edited = editTopLevel(read(text, cuts), set).toString('utf8');
          const expected: Record<string, unknown> = {};
          for (const [k, v] of Object.entries(body)) if (!Object.hasOwn(set, k)) expected[k] = v;
          for (const [k, v] of Object.entries(set)) if (v !== undefined) expected[k] = v;
          // JSON.stringify writes -0 as 0; compare as the upstream will read it.
          expect(JSON.parse(edited)).toEqual(JSON.parse(JSON.stringify(expected)));
          // The kept members are the client's bytes, layout included.
          for (const [k, v] of Object.entries(body)) {
            if (Object.hasOwn(set, k) || layout !== undefined) continue;
            expect(edited).toContain(`${JSON.stringify(k)}:${JSON.stringify(v)}`);
          }
        },
      ),
      { numRuns: 400 },
    );
  });

  it('replaces a member where it stands, removes later copies of a key sent twice, and reads keys written with escapes', () => {
    expect(editTopLevel(read('{"model":"a","x":[1,{"model":"inner"}],"model":"b"}'), { model: 'm' }).toString()).toBe('{"model":"m","x":[1,{"model":"inner"}]}');
    expect(editTopLevel(read('{"mod\\u0065l":"a","k\\"ey":"v\\\\"}'), { model: 'm', max_tokens: 7 }).toString()).toBe('{"model":"m","k\\"ey":"v\\\\","max_tokens":7}');
    expect(editTopLevel(read('{}'), { model: 'm' }).toString()).toBe('{"model":"m"}');
    expect(editTopLevel(read('{"model":"a","max_tokens":3,"stream":true}'), { model: 'm', max_tokens: undefined }).toString()).toBe('{"model":"m","stream":true}');
    expect(editTopLevel(read('{"a":1,"b":2,"c":3}'), { b: undefined }).toString()).toBe('{"a":1,"c":3}');
  });

  it('keeps multi-byte text and runs of backslashes intact across a chunk cut at every byte', () => {
    const content = 'héllo "wörld" \\ \\\\" \\\\\\ 🙂 {["';
    const text = JSON.stringify({ messages: [{ role: 'user', content }], model: 'x', max_tokens: 5 });
    for (let cut = 0; cut <= Buffer.byteLength(text); cut++) {
      const edited = JSON.parse(editTopLevel(read(text, [cut]), { model: 'up', max_tokens: 9 }).toString('utf8')) as Record<string, unknown>;
      expect(edited).toEqual({ messages: [{ role: 'user', content }], model: 'up', max_tokens: 9 });
    }
  });
});
