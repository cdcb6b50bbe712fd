// Desktop and phone-width photographs of dashboard pages, as the browser tests take them: each one also
// checks the page fits a 390 px phone, and they are written to docs/screenshots (the README's pictures)
// only when TOLLGATE_SCREENSHOTS=1.
import { writeFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { expect } from 'vitest';

export class Screenshots {
  private readonly shots: Array<[string, Buffer]> = [];

  /** The page fits a 390 px phone: nothing wider than the screen; desktop and narrow photographs. */
  async narrow(page: Page, name: string): Promise<void> {
    const desktop = await page.screenshot({ fullPage: true });
    await page.setViewportSize({ width: 390, height: 800 });
    const width = await page.evaluate<number>('document.documentElement.scrollWidth');
    expect(width, `${name} at 390 px`).toBeLessThanOrEqual(390);
    const narrow = await page.screenshot({ fullPage: true });
    await page.setViewportSize({ width: 1100, height: 760 });
    this.shots.push([`dashboard-${name}`, desktop], [`dashboard-${name}-narrow`, narrow]);
  }

  /** Into docs/screenshots, when asked for. */
  save(): void {
    if (process.env.TOLLGATE_SCREENSHOTS !== '1') return;
    for (const [name, png] of this.shots) writeFileSync(new URL(`../../docs/screenshots/${name}.png`, import.meta.url), png);
  }
}
