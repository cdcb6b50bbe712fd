// Standalone simulator for the local run: SIM_PORT (default 8099), SIM_FIRST_TOKEN_DELAY_MS, SIM_TOKEN_DELAY_MS,
// optional SIM_API_KEY (required credential), SIM_REASONING_MODELS (comma-separated) and SIM_PROMPT_CACHE=1
// (report prompt caching: prompt-cache.ts).
import { startSimulator } from './server.js';

function envInt(name: string, fallback: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${v}"`);
  return n;
}

const reasoning = process.env.SIM_REASONING_MODELS;
const sim = await startSimulator({
  port: envInt('SIM_PORT', 8099),
  firstTokenDelayMs: envInt('SIM_FIRST_TOKEN_DELAY_MS', 0),
  tokenDelayMs: envInt('SIM_TOKEN_DELAY_MS', 0),
  log: false,
  promptCache: process.env.SIM_PROMPT_CACHE === '1',
  ...(process.env.SIM_API_KEY ? { apiKey: process.env.SIM_API_KEY } : {}),
  ...(reasoning ? { reasoningModels: reasoning.split(',').map((s) => s.trim()).filter(Boolean) } : {}),
});
console.log(`simulator listening on ${sim.url} (OpenAI base ${sim.openaiBaseUrl}, Anthropic base ${sim.anthropicBaseUrl})`);
const stop = () => void sim.close().then(() => process.exit(0));
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
