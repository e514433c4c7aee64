// Dependency rules (`npm run depcheck`): the arrows of ARCHITECTURE.md, checked. Type-only imports
// count (tsPreCompilationDeps), so a type cannot sneak an arrow the wrong way either.
//
// Layers, bottom to top; a module imports only its own layer or those below:
//   src/lib, src/domain  <-  src/config.ts, src/log.ts, src/errors.ts  <-  src/db
//   <-  src/queue, src/chain, src/invoicing, src/mail, src/pdf, src/observability  <-  src/http, jobs/
//   <-  src/runtime  <-  main/
const UP_FROM_DB = '^src/(queue|chain|invoicing|mail|pdf|observability|http|runtime)/';
const UP_FROM_MIDDLE = '^src/(http|runtime)/';

/** Pure libraries the domain may use: computation and static data only, no I/O. */
// viem: its address and hashing utilities (checksums, keccak256) only.
const PURE_LIBRARIES = ['decimal[.]js', 'luxon', 'safe-stable-stringify', 'ipaddr[.]js', '@vvo/tzdb', 'viem'];

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Import cycles make the layers meaningless and the load order fragile.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'devchain-is-dev-tooling',
      severity: 'error',
      comment: 'src/devchain (anvil, the test contracts, the local chains file) serves `npm run chain`, the tests and the benchmarks: the service never depends on it.',
      from: { path: '^(src|jobs)/', pathNot: '^src/devchain/' },
      to: { path: '^src/devchain/' },
    },
    {
      name: 'src-not-to-jobs',
      severity: 'error',
      comment: 'src/ is the engine; the handlers in jobs/ are handed to the worker runtime by the entrypoint.',
      from: { path: '^src/' },
      to: { path: '^jobs/' },
    },
    {
      name: 'nothing-to-entrypoints',
      severity: 'error',
      comment: 'main/ is the top: nothing imports an entrypoint.',
      from: { pathNot: '^main/' },
      to: { path: '^main/' },
    },
    {
      name: 'domain-is-pure',
      severity: 'error',
      comment: 'src/domain imports only itself and pure libraries: no I/O, no config, no logger.',
      from: { path: '^src/domain/' },
      to: {
        pathNot: ['^src/domain/', `(^|/)node_modules/(${PURE_LIBRARIES.join('|')})/`, '^(node:)?crypto$'],
      },
    },
    {
      name: 'lib-is-generic',
      severity: 'error',
      comment: 'src/lib holds generic helpers below everything: it imports nothing of the service.',
      from: { path: '^src/lib/' },
      to: { path: '^(src|jobs|main)/', pathNot: '^src/lib/' },
    },
    {
      name: 'base-below-db',
      severity: 'error',
      comment: 'config, log and errors sit just above the domain.',
      from: { path: '^src/(config|config-schema|chains-config|log|errors)[.]ts$' },
      to: { path: '^src/(db|queue|chain|invoicing|mail|pdf|observability|http|runtime)/' },
    },
    {
      name: 'db-below-services',
      severity: 'error',
      comment: 'src/db knows SQL and the domain, nothing above it.',
      from: { path: '^src/db/' },
      to: { path: UP_FROM_DB },
    },
    {
      name: 'services-below-http',
      severity: 'error',
      comment: 'queue, mail, pdf and observability are used by http, jobs and runtime, never the other way.',
      from: { path: '^src/(queue|chain|mail|pdf|observability)/' },
      to: { path: UP_FROM_MIDDLE },
    },
    {
      name: 'invoicing-below-http-and-jobs',
      severity: 'error',
      comment:
        'src/invoicing (issuing, sending, checkouts, sandbox payments) is called by routes and jobs alike, so it never reaches up to http or the runtime (jobs/: src-not-to-jobs). Its refusals are DomainErrors the routes map.',
      from: { path: '^src/invoicing/' },
      to: { path: UP_FROM_MIDDLE },
    },
    {
      name: 'http-below-runtime',
      severity: 'error',
      comment: 'Routes get their dependencies handed in; they never reach for the runtime that wires them.',
      from: { path: '^src/http/' },
      to: { path: '^src/runtime/' },
    },
    {
      name: 'jobs-below-runtime',
      severity: 'error',
      comment: 'Handlers see their payload and a context (src/queue/job-context.ts), not the runtime or the HTTP layer.',
      from: { path: '^jobs/' },
      to: { path: '^src/(runtime|http)/' },
    },
    {
      name: 'driver-only-in-db',
      severity: 'error',
      comment: 'SQL lives in src/db: only it talks to the Postgres driver (eslint.config.js also refuses SQL text and .query() calls elsewhere).',
      from: { path: '^(src|jobs|main)/', pathNot: '^src/db/' },
      to: { path: '(^|/)node_modules/(pg|pg-[a-z-]+|node-pg-migrate)/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'routes-not-to-app',
      severity: 'error',
      comment: 'Route modules take their dependencies from http/types.ts and helpers from http/route-helpers.ts.',
      from: { path: '^src/http/routes/' },
      to: { path: '^src/http/(app[.]ts|routes/)' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
    exclude: { path: '^(dist|coverage|var)/' },
  },
};
