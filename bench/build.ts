// The targets run from a build, as the image ships them (node on compiled JavaScript, no tsx): tsx's
// loader keeps ~30 MB of transpiler state in every process, which a memory figure must not count.
// The whole project is compiled once per run into .bench-build/ at the repository root, where the
// sources' fallbacks for Lua scripts, migrations and assets (../../../src/...) find them.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const BENCH_BUILD_DIR = '.bench-build';

/** Compiles the project (tsc) and returns the path of the built bench/serve.js. */
export function buildTargets(): string {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', 'tsconfig.json', '--noEmit', 'false', '--outDir', BENCH_BUILD_DIR, '--sourceMap', 'false', '--incremental', 'false'], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return fileURLToPath(new URL(`../${BENCH_BUILD_DIR}/bench/serve.js`, import.meta.url));
}
