// Images sent to a Gemini upstream are reserved by Gemini's own rule (issue: a money hole). Gemini 2.x
// counts an image larger than 384 px a side in 768 × 768 px tiles of 258 tokens (a 3840 × 2160 image:
// 15 tiles, 3,870 tokens), more than the 1,600 tokens the other formats' bound stops at, which is what
// this gateway reserved for any image before. The simulator's Gemini mode counts images that way, so:
//  - a 4K image from each client format (chat completions, messages, Responses, with the official SDKs)
//    is served and charged exactly the simulator's usage: the hold covered it (the ledger charges at most
//    what was held, so an under-reserved request is charged less than its usage);
//  - a key whose lifetime cap lies between the old bound and the real cost is refused up front with a
//    402 naming the cap, and nothing reaches the upstream (before, it was served and billed past it).
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CatalogModel } from '../../src/catalog/snapshot.js';
import { measureUpstreamBody } from '../../src/reserve/upstream-bodies.js';
import { worstCase } from '../../src/reserve/worst-case.js';
import { MAX_IMAGE_TOKENS } from '../../src/wire/image-tokens.js';
import type { SimulatedRequest } from '../../src/simulator/server.js';
import { startHarness, type Harness } from '../helpers/gateway-harness.js';
import { pngBase64 } from '../helpers/png.js';
import { expectChargesMatchSimulator, mark, simulatorCost } from './e2e-support.js';

const MODEL = 'outlaw-1-xploded';
const MAX_TOKENS = 16;
const IMAGE = pngBase64(3840, 2160);
const DATA_URL = `data:image/png;base64,${IMAGE}`;
/** What Gemini 2.x counts for the image: 5 × 3 tiles of 258 tokens. */
const IMAGE_TOKENS = 15 * 258;

type Client = 'chat' | 'messages' | 'responses';
const CLIENTS: readonly Client[] = ['chat', 'messages', 'responses'];

function clients(h: Harness) {
  return {
    openai: new OpenAI({ apiKey: h.key, baseURL: `${h.baseUrl}/v1`, maxRetries: 0 }),
    anthropic: new Anthropic({ apiKey: h.key, baseURL: h.baseUrl, maxRetries: 0 }),
  };
}

/** One request with the 4K image, in the client format's own shape. */
async function send(h: Harness, client: Client): Promise<void> {
  const { openai, anthropic } = clients(h);
  if (client === 'chat') {
    await openai.chat.completions.create({
      model: MODEL,
      max_tokens: MAX_TOKENS,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, { type: 'image_url', image_url: { url: DATA_URL } }] }],
    });
  } else if (client === 'messages') {
    await anthropic.messages.create({
      model: MODEL,
      max_tokens: MAX_TOKENS,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: IMAGE } }] }],
    });
  } else {
    await openai.responses.create({
      model: MODEL,
      max_output_tokens: MAX_TOKENS,
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'What is in this picture?' }, { type: 'input_image', image_url: DATA_URL, detail: 'auto' }] }],
    });
  }
}

let served: Harness;
/** Per client format: the Gemini request its request became (the served case's). */
const seen = new Map<Client, SimulatedRequest>();

beforeAll(async () => {
  served = await startHarness({ upstreamFormat: 'gemini', ledger: 'redis' });
});
afterAll(async () => {
  await served?.close();
});

const modelOf = (h: Harness): CatalogModel => h.catalog.current().byId.get(MODEL)!;

const lastUpstream = (h: Harness): SimulatedRequest => h.simulator.requests[h.simulator.requests.length - 1]!;

describe('a 4K image to a Gemini upstream', () => {
  it.each(CLIENTS)('%s: served and charged exactly its usage, 15 tiles of the image included', async (client) => {
    const m0 = await mark(served);
    await send(served, client);
    const upstream = lastUpstream(served);
    seen.set(client, upstream);
    expect(upstream.inputTokens).toBeGreaterThan(IMAGE_TOKENS);
    // Charged the simulator's usage to the micro-dollar: the hold was at least that.
    const [rec] = await expectChargesMatchSimulator(served, m0, 1);
    expect(rec!.cost).toBe(simulatorCost(served, upstream));
  });

  it.each(CLIENTS)('%s: a key whose cap lies between the old 1,600-token bound and the real cost is refused up front with a 402 naming the cap', async (client) => {
    // The Gemini body of the same request (served above, or here when this case runs alone).
    let upstream = seen.get(client);
    if (upstream === undefined) {
      await send(served, client);
      upstream = lastUpstream(served);
    }
    // The real cost: the simulator's usage (as Gemini counts the image) at the catalog's prices.
    const cost = simulatorCost(served, upstream);
    // What the old bound reserved for the same body: its image at 1,600 tokens.
    const body = upstream.body as Record<string, unknown>;
    const footprint = measureUpstreamBody(body, JSON.stringify(body), 'gemini', MAX_TOKENS);
    const oldBound = worstCase({ ...footprint, imageTokens: MAX_IMAGE_TOKENS * footprint.images }, modelOf(served)).amount;
    const cap = Math.floor((oldBound + cost) / 2);
    expect(oldBound).toBeLessThan(cap);
    expect(cap).toBeLessThan(cost);

    const h = await startHarness({ upstreamFormat: 'gemini', ledger: 'redis', keyCaps: { lifetimeCap: cap } });
    try {
      const err = (await send(h, client).then(
        () => undefined,
        (e: unknown) => e,
      )) as InstanceType<typeof OpenAI.APIError> | InstanceType<typeof Anthropic.APIError> | undefined;
      expect(err, 'refused').toBeDefined();
      expect(err!.status).toBe(402);
      const error = JSON.stringify(err!.error);
      expect(error).toContain('key_lifetime_cap_reached');
      expect(error).toContain(`"available_micro_usd":${cap}`);
      expect(h.simulator.requests.filter((r) => r.path.includes(':generateContent'))).toHaveLength(0);
      await h.settled();
      expect(await h.backend.ledger.listUsage(h.accountId, { limit: 10 })).toHaveLength(0);
    } finally {
      await h.close();
    }
  });
});

describe('an image whose size cannot be read, to a Gemini upstream', () => {
  it('is refused with a 400 in the client format saying why, and nothing reaches the upstream or is charged', async () => {
    const m0 = await mark(served);
    const corrupt = Buffer.from('not an image, only bytes that claim to be one').toString('base64');
    const { openai, anthropic } = clients(served);
    const chat = await openai.chat.completions
      .create({ model: MODEL, max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${corrupt}` } }] }] })
      .then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(chat?.status).toBe(400);
    expect(chat?.message).toMatch(/width and height could not be read/);
    const messages = await anthropic.messages
      .create({ model: MODEL, max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: corrupt } }] }] })
      .then(() => undefined, (e: unknown) => e as InstanceType<typeof Anthropic.APIError>);
    expect(messages?.status).toBe(400);
    expect(JSON.stringify(messages?.error)).toContain('"type":"invalid_request_error"');
    expect(served.simulator.requests.length).toBe(m0.simIndex);
    await served.settled();
    expect(await served.backend.ledger.listUsage(served.accountId, { limit: 10_000 })).toHaveLength(m0.usageCount);
  });
});
