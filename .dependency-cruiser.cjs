// The import rules `npm run lint` checks with dependency-cruiser (type-only imports included):
//   - no import cycle, between any two modules of src/ and operator/;
//   - no import from a lower layer to a higher one. LAYERS lists them from the bottom up; a module may
//     import from its own layer and the ones below, never from one above;
//   - the apps (admin, dashboard, top-ups) move money through src/accounts/service.ts, never by writing
//     ledger entries themselves (src/record/money-movement.ts).
// Known violations (.dependency-cruiser-known-violations.json) are ones left to their owners; the file is
// empty now (the dashboard's route modules share dashboard/state.ts, not its app). Any new one fails the lint.
const LAYERS = [
  ['foundation: what the formats share, the internal representation', '^src/wire/', '^src/representation/'],
  ['wire formats', '^src/formats/'],
  ['the model catalog', '^src/catalog/'],
  ['money, limits, accounts, the record, configuration', '^src/(billing|limits|accounts|record)/', '^src/config\\.ts$', '^src/backend-from-config\\.ts$'],
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
    ...layerRules,
    {
      name: 'money-through-accounts',
      comment: 'the apps move money through src/accounts/service.ts, never by writing ledger entries themselves',
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
