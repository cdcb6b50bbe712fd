// Debian's chromium, driven by playwright-core, as the browser tests use it: headless, no QUIC, no
// background networking (this machine's network is closed), a fresh throwaway profile per launch.
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** CI installs chromium (.ci/run); a developer machine without it skips browser files rather than fail. */
export const browserMissing = !existsSync(CHROMIUM) && process.env.CI === undefined;

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}
