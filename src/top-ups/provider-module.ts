// What Tollgate knows about one payment provider, declared once in the provider's own module and listed
// in providers/index.ts: its name (stored on each top-up), its label for pages, its webhook path, how it
// reads its settings from the environment, and (optionally) its test-mode fake. The webhook routes, the
// configuration, the test mode, the start-up banner and the pages are all derived from that list, so a
// new provider is its module plus one line there.
import type { PaymentProvider, ProviderName } from './provider.js';

export type Env = Record<string, string | undefined>;

/** A provider's fake on loopback, with the real client pointed at it (the local run's test mode). */
export interface TestModeProvider {
  provider: PaymentProvider;
  /** Where the fake serves its hosted pages, for the start-up banner. */
  url: string;
  /** Where the fake sends its webhooks (set once the dashboard's port listens). */
  deliverTo(webhookUrl: string): void;
  close(): Promise<void>;
}

export interface ProviderModule {
  /** Stored on each top-up (top_ups.provider) and in forms: see PROVIDER_NAME. */
  readonly name: ProviderName;
  /** For pages: "Card", "Crypto". */
  readonly label: string;
  /** The provider's own name, for operators (the banner, configuration errors): "Stripe". */
  readonly title: string;
  /** Where its webhooks are POSTed on the dashboard's port; the provider's verifyWebhook handles them. */
  readonly webhookPath: string;
  /** The provider its settings in `env` describe; undefined when none is set, an error when some are missing. */
  fromEnv(env: Env): PaymentProvider | undefined;
  /** Its fake on loopback with fresh secrets; a provider without one is not offered in test mode. */
  startTestMode?(host: string): Promise<TestModeProvider>;
}

/** What the record accepts as a provider's name (migration 033 checks the same shape). */
export const PROVIDER_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

/**
 * The settings named in `names`, all or none: undefined when none is set, an error naming every one of
 * them when only some are (an incomplete configuration fails at start, not at the first checkout).
 */
export function envSettings<K extends string>(env: Env, title: string, names: readonly K[]): Record<K, string> | undefined {
  const set = (v: string | undefined): v is string => v !== undefined && v !== '';
  const given = names.filter((n) => set(env[n]));
  if (given.length === 0) return undefined;
  if (given.length < names.length) throw new Error(`${title} needs ${names.slice(0, -1).join(', ')}${names.length > 1 ? ' and ' : ''}${names[names.length - 1] ?? ''}`);
  return Object.fromEntries(names.map((n) => [n, env[n] as string])) as Record<K, string>;
}

/** Checks a registry once: names the record accepts, and no two providers with one name or one webhook path. */
export function checkedRegistry(modules: readonly ProviderModule[]): readonly ProviderModule[] {
  const names = new Set<string>();
  const paths = new Set<string>();
  for (const m of modules) {
    if (!PROVIDER_NAME.test(m.name)) throw new Error(`payment provider name ${JSON.stringify(m.name)} must match ${PROVIDER_NAME.source}`);
    if (!m.webhookPath.startsWith('/')) throw new Error(`payment provider ${m.name}: its webhook path must start with /`);
    if (names.has(m.name)) throw new Error(`two payment providers are named ${m.name}`);
    if (paths.has(m.webhookPath)) throw new Error(`two payment providers take webhooks at ${m.webhookPath}`);
    names.add(m.name);
    paths.add(m.webhookPath);
  }
  return modules;
}
