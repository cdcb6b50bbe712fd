// The Models page: every model of the catalog the gateway serves, with its context and its prices per
// 1M tokens by class (input, output, prompt-cache read, 5-minute and 1-hour cache write, reasoning), as
// the catalog writes them. A class without its own price costs the input price (reasoning: the output
// price), which the page says rather than leaving a blank.
import type { CatalogModel } from '../catalog/snapshot.js';
import { html, type Html } from './html.js';
import { layout } from './pages.js';
import type { Session } from './sessions.js';

const perMillion = (price: string | undefined, otherwise: string): Html => (price === undefined ? html`<span class="note">${otherwise}</span>` : html`$${price}`);

export function modelsPageHtml(session: Session, models: readonly CatalogModel[] | undefined): Html {
  const body =
    models === undefined
      ? html`<p class="note">This dashboard has no catalog to show; the gateway's <code>GET /v1/models</code> lists its models and prices.</p>`
      : html`<p class="note">Prices in USD per 1M tokens. Cache reads and writes are each billed at their own price; a class without one costs the input price.</p>
<table id="models"><thead><tr><th>Model</th><th>Context</th><th class="num">Input</th><th class="num">Output</th><th class="num">Cache read</th><th class="num">Cache write 5m</th><th class="num">Cache write 1h</th><th class="num">Reasoning</th></tr></thead><tbody>${models.map((m) => {
          const p = m.pricing.display;
          return html`<tr><td><code>${m.id}</code><br><small>${m.displayName}</small></td><td>${m.contextDisplay}</td><td class="num">$${p.input}</td><td class="num">$${p.output}</td>
<td class="num">${perMillion(p.cacheRead, 'as input')}</td><td class="num">${perMillion(p.cacheWrite5m, 'as input')}</td><td class="num">${perMillion(p.cacheWrite1h, 'as input')}</td><td class="num">${m.supportsReasoning ? perMillion(p.reasoning, 'as output') : '—'}</td></tr>`;
        })}</tbody></table>`;
  return layout('Models', session, html`<h1>Models</h1>${body}`);
}

/** A model as the dashboard's JSON shows it: prices as the catalog's decimal text, absent when not set. */
export function apiModel(m: CatalogModel): Record<string, unknown> {
  const p = m.pricing.display;
  return {
    id: m.id,
    name: m.displayName,
    context_length: m.contextWindow,
    supports_reasoning: m.supportsReasoning,
    pricing: {
      input: p.input,
      output: p.output,
      cache_read: p.cacheRead ?? null,
      cache_write_5m: p.cacheWrite5m ?? null,
      cache_write_1h: p.cacheWrite1h ?? null,
      reasoning: p.reasoning ?? null,
    },
  };
}
