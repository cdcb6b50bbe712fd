// The spend per member or per team over a period as a stacked bar chart: one bar per UTC day, one
// coloured segment per member (or team) in it, drawn as inline SVG on the server (no script, no CDN).
// The seven largest spenders get a colour each and the rest share a pale one; the group of no member
// (or no team) is grey. The legend and the grouped table use the same colours.
import { formatUsdAmount } from '../billing/money.js';
import { html, type Html } from './html.js';
import type { GroupedUsage } from './usage-groups.js';
import { daysOf } from './usage-view.js';

const PALETTE = ['#2456d6', '#16a34a', '#d97706', '#9333ea', '#dc2626', '#0891b2', '#db2777'] as const;
const NONE_COLOUR = '#94a3b8';
const OTHERS_COLOUR = '#cbd5e1';
/** Longer periods are not drawn (bars would be thinner than a pixel on a phone). */
export const MAX_CHART_DAYS = 92;

const money = (micros: number): string => `$${formatUsdAmount(micros)}`;

/** Each group's colour (by id; null for no member or no team), in the order of the groups (largest first). */
export function groupColours(g: GroupedUsage): Map<string | null, string> {
  const out = new Map<string | null, string>();
  let next = 0;
  for (const x of g.groups) out.set(x.id, x.id === null ? NONE_COLOUR : (PALETTE[next++] ?? OTHERS_COLOUR));
  return out;
}

/** A round step (1, 2 or 5 times a power of ten) so that four steps reach at least `max`. */
function axisStep(max: number): number {
  const rough = Math.max(1, max / 4);
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? 10 * power;
  return Math.max(1, Math.round(step));
}

export function spendChart(g: GroupedUsage): Html {
  const days = daysOf(g.period);
  const what = g.grouping === 'member' ? 'member' : 'team';
  if (days.length > MAX_CHART_DAYS) return html`<p class="note">The chart shows at most ${MAX_CHART_DAYS} days; choose a shorter range to see the spend per day.</p>`;
  if (g.total.cost === 0) return html`<p class="note">Nothing was spent from ${g.period.from} to ${g.period.to}.</p>`;
  const colours = groupColours(g);
  const labels = new Map(g.groups.map((x) => [x.id, x.label]));
  const byDay = new Map<string, Array<{ id: string | null; spent: number }>>();
  for (const d of g.days) byDay.set(d.day, [...(byDay.get(d.day) ?? []), { id: d.id, spent: d.spent }]);
  // Segments stack in the order of the legend (largest spender at the bottom).
  const rank = new Map(g.groups.map((x, i) => [x.id, i]));
  const dayTotal = (day: string): number => (byDay.get(day) ?? []).reduce((a, s) => a + s.spent, 0);
  const step = axisStep(Math.max(...days.map(dayTotal)));
  const top = step * 4;
  const [W, H, left, bottom, head] = [720, 220, 64, 24, 8];
  const plotW = W - left - 8;
  const plotH = H - bottom - head;
  const slot = plotW / days.length;
  const barW = Math.max(1, Math.min(28, slot * 0.72));
  const y = (v: number): number => head + plotH - (v / top) * plotH;
  const grid = [0, 1, 2, 3, 4].map((i) => {
    const v = step * i;
    return html`<line x1="${left}" x2="${W - 8}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="${i === 0 ? '#9ca3af' : '#e5e7eb'}"/><text x="${left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end" font-size="11" fill="#5b6572">${money(v)}</text>`;
  });
  const every = Math.max(1, Math.ceil(days.length / 10));
  const bars = days.map((day, i) => {
    const x = left + i * slot + (slot - barW) / 2;
    let base = 0;
    const segments = [...(byDay.get(day) ?? [])].sort((a, b) => (rank.get(a.id) ?? 0) - (rank.get(b.id) ?? 0));
    const rects = segments.map((s) => {
      const y0 = y(base);
      base += s.spent;
      const h = Math.max(0.75, y0 - y(base));
      return html`<rect x="${x.toFixed(1)}" y="${(y0 - h).toFixed(1)}" width="${barW.toFixed(1)}" height="${h.toFixed(1)}" fill="${colours.get(s.id) ?? OTHERS_COLOUR}" data-group="${s.id ?? ''}"><title>${day} · ${labels.get(s.id) ?? ''}: ${money(s.spent)}</title></rect>`;
    });
    const tick = i % every === 0 || i === days.length - 1 ? html`<text x="${(left + i * slot + slot / 2).toFixed(1)}" y="${H - 6}" text-anchor="middle" font-size="11" fill="#5b6572">${day.slice(8)}</text>` : '';
    return html`${rects}${tick}`;
  });
  return html`<figure class="card spend-chart" id="spend-by-${what}"><figcaption><strong>Spend per ${what} per day</strong> · ${g.period.from} to ${g.period.to} (UTC) · ${money(g.total.cost)} in all</figcaption>
<svg viewBox="0 0 ${W} ${H}" width="100%" role="img" aria-label="Spend per ${what} per day from ${g.period.from} to ${g.period.to}" style="max-height:260px;display:block">${grid}${bars}</svg>
<ul class="legend" style="list-style:none;padding:0;margin:.6rem 0 0;display:flex;flex-wrap:wrap;gap:.3rem 1.2rem;font-size:.88rem">${g.groups.map(
    (x) => html`<li><span aria-hidden="true" style="display:inline-block;width:.8rem;height:.8rem;border-radius:2px;margin-right:.35rem;vertical-align:-1px;background:${colours.get(x.id) ?? OTHERS_COLOUR}"></span>${x.label} <span class="note">${money(x.cost)}</span></li>`,
  )}</ul></figure>`;
}
