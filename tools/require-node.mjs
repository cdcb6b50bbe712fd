// Run before `npm ci`, `npm start` and `npm test` (package.json's pre-scripts): on a Node older than the
// one in .node-version, say what to do instead of failing later with an obscure error. Plain JavaScript
// that any Node can parse.
import { readFileSync } from 'node:fs';

const wanted = readFileSync(new URL('../.node-version', import.meta.url), 'utf8').trim();
const wantedMajor = Number(wanted.split('.')[0]);
const major = Number(process.versions.node.split('.')[0]);
if (major < wantedMajor) {
  console.error(
    `\nTollgate runs on Node ${wantedMajor} LTS; this is Node ${process.versions.node}, which no longer gets security fixes.\n` +
      `  - Install Node ${wantedMajor} (nvm install ${wantedMajor}, or your system's package) and run the command again, or\n` +
      `  - put the one that \`tools/node.sh\` fetches from the npm registry first on your PATH:\n` +
      `      export PATH="$(tools/node.sh):$PATH"\n` +
      `  - \`make check\` does that by itself before it runs the whole suite.\n`,
  );
  process.exit(1);
}
