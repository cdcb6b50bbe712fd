// An upstream body with the credentials the gateway sent replaced, however the network splits it: none
// left in it for any split into reads (and, for one credential, the text one replace over the whole body gives), and nothing held back at a
// read's end that cannot start a credential (a stream's events go out as they arrive).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { redactedBody } from '../../src/upstream/redacted-body.js';
import { redactSecrets, sentCredentials } from '../../src/upstream/sent-credentials.js';

async function* reads(text: Buffer, cuts: number[]): AsyncGenerator<Buffer> {
  let from = 0;
  for (const cut of [...new Set(cuts)].sort((a, b) => a - b)) {
    if (cut <= from || cut >= text.length) continue;
    yield text.subarray(from, cut);
    from = cut;
  }
  yield text.subarray(from);
}

describe('redactedBody', () => {
  it('replaces every credential wherever the reads split it (text() and the chunks alike)', async () => {
    const alphabet = fc.constantFrom('a', 'b', 'k', '-', ' ', '"', 'é');
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.constantFrom('a', 'b', 'k', '-'), { minLength: 8, maxLength: 14 }).map((c) => c.join('')), { minLength: 1, maxLength: 3 }),
        fc.array(fc.oneof(fc.array(alphabet, { maxLength: 12 }).map((c) => c.join('')), fc.nat(2)), { maxLength: 12 }),
        fc.array(fc.nat(200), { maxLength: 10 }),
        async (secrets, pieces, cuts) => {
          const text = pieces.map((p) => (typeof p === 'number' ? (secrets[p] ?? '') : p)).join('');
          const sorted = [...new Set(secrets)].sort((a, b) => b.length - a.length);
          const expected = redactSecrets(text, sorted);
          const whole = await redactedBody(reads(Buffer.from(text), cuts), sorted).text();
          let streamed = '';
          for await (const chunk of redactedBody(reads(Buffer.from(text), cuts), sorted)) streamed += chunk.toString('latin1');
          expect(Buffer.from(streamed, 'latin1').toString('utf8')).toBe(whole);
          for (const s of sorted) expect(whole.includes(s)).toBe(false);
          // One credential: exactly what one replace over the whole body gives (overlapping ones may be cut differently, never kept).
          if (sorted.length === 1) expect(whole).toBe(expected);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('holds nothing back from a read that ends in a complete event', async () => {
    const body = redactedBody(reads(Buffer.from('data: {"a":1}\n\ndata: {"b":2}\n\n'), [15]), ['secret-value-123']);
    const out: string[] = [];
    for await (const chunk of body) out.push(chunk.toString());
    expect(out).toEqual(['data: {"a":1}\n\n', 'data: {"b":2}\n\n']);
  });
});

describe('sentCredentials', () => {
  it("finds each format's credential: Bearer, x-api-key, x-goog-api-key, the catalog's header, Gemini's ?key=", () => {
    const found = sentCredentials(
      { authorization: 'Bearer sk-openai-0123456789', 'x-api-key': 'anthropic-0123456789', 'x-goog-api-key': 'AIzaGoogle0123456789', 'x-custom': 'custom-0123456789', 'content-type': 'application/json' },
      '/v1beta/models/m:generateContent?alt=sse&key=query+key/0123456789',
      'x-custom',
    );
    expect(found).toEqual(expect.arrayContaining(['sk-openai-0123456789', 'anthropic-0123456789', 'AIzaGoogle0123456789', 'custom-0123456789', 'query key/0123456789', 'query%20key%2F0123456789', 'query key\\/0123456789'.replace('\\/', '/')]));
    expect(found).not.toContain('application/json');
    // Longest first, and none too short to be a credential.
    expect(found).toEqual([...found].sort((a, b) => b.length - a.length));
    expect(sentCredentials({ 'x-api-key': 'short' }, '')).toEqual([]);
  });
});
