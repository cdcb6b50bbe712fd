// The import rules `npm run lint` checks with dependency-cruiser (type-only imports included):
//   - no import cycle, between any two modules of src/ and operator/, nor between folders (no-folder-cycle);
//   - no import from a lower layer to a higher one. LAYERS lists them from the bottom up; a module may
//     import from its own layer and the ones below, never from one above;
//   - the apps (admin, dashboard, top-ups) move money through src/account-service/account-service.ts,
//     never by writing ledger entries themselves (src/record/money-movement.ts).
// Known violations (.dependency-cruiser-known-violations.json) are ones left to their owners; the file is
// empty now (the dashboard's route modules share dashboard/state.ts, not its app). Any new one fails the lint.
const LAYERS = [
  ['foundation: what the formats share, the internal representation', '^src/wire/', '^src/representation/'],
  ['wire formats', '^src/formats/'],
  ['the model catalog', '^src/catalog/'],
  // The money layer, one folder over the other (issue 39):
  ['accounts, keys and teams: the types and checks every store shares; configuration', '^src/accounts/', '^src/config\\.ts$'],
  ['every limit, declared once', '^src/limits/'],
  ['money: the ledgers (Redis Lua, memory) and the account stores kept beside them', '^src/billing/'],
  ['the record (PostgreSQL), and the backend built from the configuration', '^src/record/', '^src/backend-from-config\\.ts$'],
  ['the account service, the one place accounts, keys and money change', '^src/account-service/'],
  ['telemetry', '^src/telemetry/'],
  ['the request context and the gateway error', '^src/request/'],
  ['the request path steps', '^src/(authenticate|decode|reserve|upstream|relay|settle)/', '^src/translate/'],
  ['the metered exchange', '^src/exchange/'],
  ['the HTTP edge', '^src/(http|responses)/'],
  ['the apps', '^src/(admin|dashboard|top-ups|simulator)/', '^operator/'],
  ['the entry points', '^src/(?!config\\.ts$|backend-from-config\\.ts$)[^/]+\\.ts$'],
];

const layerRules = LAYERS.slice(0, -1).map(([name, ...paths], i) => ({
  name: `layer-${i}-imports-up`,
  comment: `${name} must not import from a higher layer`,
  severity: 'error',
  from: { path: paths },
  to: { path: LAYERS.slice(i + 1).flatMap(([, ...above]) => above) },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    { name: 'no-circular', comment: 'no import cycle', severity: 'error', from: {}, to: { circular: true } },
    {
      name: 'no-folder-cycle',
      comment: 'no ring of folders: no two folders import each other, directly or through others',
      severity: 'error',
      scope: 'folder',
      // One ring is left to the request path's owners, decode -> reserve -> translate -> decode (and
      // translate -> relay -> decode); dependency-cruiser cannot list a folder's violation as known, so
      // a ring that starts only in those four folders is not checked (test/unit/folder-imports.test.ts
      // still fails on any pair of them).
      from: { path: '^(?!src/(decode|reserve|translate|relay)$)' },
      to: { circular: true },
    },
    ...layerRules,
    {
      name: 'money-through-account-service',
      comment: 'the apps move money through src/account-service/account-service.ts, never by writing ledger entries themselves',
      severity: 'error',
      from: { path: '^src/(admin|dashboard|top-ups)/' },
      to: { path: '^src/record/money-movement\\.ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '^src/dashboard/assets/' },
  },
};
