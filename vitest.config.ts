import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The suites that must pass on both stores run a second time on PostgreSQL (the `pg` project:
 * PAYPOLICY_TEST_STORE=pg makes test/helpers/server.ts start each test server on a fresh database
 * of the test PostgreSQL). Tests that reach into SQLite's own handles (Paypolicy.store) stay
 * SQLite-only; so do the fault tests, which inject file-system faults under SQLite. A test server
 * restarted on the same data directory gets the same PostgreSQL database back (test/helpers/server.ts).
 */
const BOTH_STORES = [
  'test/sign-concurrency.test.ts',
  'test/sign-golden.test.ts',
  'test/sign-transports.test.ts',
  'test/approvals.test.ts',
  'test/quote.e2e.test.ts',
  'test/adversarial/tenancy.test.ts',
  'test/dashboard/sessions.test.ts',
  'test/dashboard/spend.test.ts',
  'test/dashboard/dashboard.e2e.test.ts',
  'test/dashboard/form-fields.test.ts',
  'test/dashboard/limits-editor.test.ts',
  'test/adversarial/collection.test.ts',
  'test/adversarial/fees.test.ts',
  'test/adversarial/neverPaysUnallowed.test.ts',
  'test/adversarial/redirects.test.ts',
  'test/adversarial/pathConfusion.test.ts',
  'test/adversarial/attributionRace.test.ts',
  'test/adversarial/registryIsolation.test.ts',
  'test/registryLimits.test.ts',
  'test/adversarial/registryBytes.test.ts',
  'test/bad-input.test.ts',
  'test/garbage.test.ts',
  'test/pagination.test.ts',
  'test/admin.test.ts',
  'test/agent-spend.test.ts',
  'test/policySimulation.test.ts',
  'test/auth.test.ts',
  'test/rpc-auth.test.ts',
  'test/rest-golden.test.ts',
  'test/rpc-wire.test.ts',
  'test/rpc-error-info.test.ts',
  'test/contract.test.ts',
  'test/strict-input.test.ts',
  'test/transports.test.ts',
  'test/x402-verify.test.ts',
  'test/paywall-sign.e2e.test.ts',
  'test/paywall-max-amount.e2e.test.ts',
  'test/mpp-splits.e2e.test.ts',
  'test/tempo-fees.e2e.test.ts',
  'test/treasury-balance.e2e.test.ts',
  'test/onchain-authorizations.e2e.test.ts',
  'test/onchain-submission.e2e.test.ts',
  'test/rawTransactionBroadcast.test.ts',
  'test/onchain-restart.e2e.test.ts',
  'test/onchain-tracking.e2e.test.ts',
  'test/adversarial/tenantShare.test.ts',
  'test/adversarial/tenantFlood.test.ts',
  'test/adversarial/probeShare.test.ts',
  'test/paywall-size.e2e.test.ts',
  'test/adversarial/rpcAuthority.test.ts',
  'test/adversarial/staleCapSnapshot.test.ts',
  'test/adversarial/submitBacklog.test.ts',
  'test/adversarial/submitIsolation.test.ts',
  'test/maxPerPayment.test.ts',
  'test/limits.test.ts',
  'test/policyVersions.test.ts',
];

/**
 * Files whose assertions measure time or latency against a bound or a control (startup output,
 * p50 of one organization's signs under another's load, requests failing fast within a bound, a
 * timing side channel, queue and probe deadlines of overload), or need work done within a window or
 * before a fixed timeout (a WAL bound under sustained load, bursts on one agent's row, RPC calls to
 * a local chain within the node timeout). They run after the others, one file
 * at a time: with other files' servers competing for the same cores, what they measure would be
 * that competition. Every other file waits mostly on I/O (servers, chain polls, timers), so those
 * run several at once.
 */
const ALONE = [
  'test/startup-output.test.ts',
  'test/adversarial/registryIsolation.test.ts',
  'test/adversarial/registryBytes.test.ts',
  'test/adversarial/tenantFlood.test.ts',
  'test/adversarial/tenantShare.test.ts',
  'test/adversarial/probeShare.test.ts',
  'test/adversarial/overload.test.ts',
  'test/adversarial/slowNodeIsolation.test.ts',
  'test/adversarial/nodeCooldown.test.ts',
  'test/replicas/outage.test.ts',
  'test/store/pg/unitOfWork.test.ts',
  'test/store/pg/clusterTimeout.test.ts',
  'test/onchain-submission.e2e.test.ts',
  'test/paywalls/malformed.test.ts',
  'test/dashboard/passwords.test.ts',
  // Throughput within a window, or bursts against the store's and the RPC node's timeouts.
  'test/faults/walRestartSlowSync.test.ts',
  'test/sign-concurrency.test.ts',
  'test/replicas/nonces.test.ts',
  'test/adversarial/submitIsolation.test.ts',
  // Counts the source files one sign runs in a fresh process: modules other files ran first
  // would change what V8's coverage sees.
  'test/unit/signPathFiles.test.ts',
];

/**
 * Files at once, outside ALONE. Most of a file's time is spent waiting on its servers, databases
 * and timers, so three files keep two cores busy; more only adds contention (and PostgreSQL
 * connections: each server holds a pool, each replica test three). PAYPOLICY_TEST_WORKERS overrides it.
 */
const WORKERS = Number(process.env.PAYPOLICY_TEST_WORKERS ?? 3);

const pg = { PAYPOLICY_TEST_STORE: 'pg' };

export default defineConfig({
  test: {
    globalSetup: ['./test/globalSetup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // A worker process runs its files one after another with the modules they share loaded once:
    // loading the server's modules afresh for every file was about a third of the suite's time.
    // Each file still closes what it opens (servers, pools, browsers); the time-measuring files
    // below run isolated.
    isolate: false,
    maxWorkers: WORKERS,
    reporters: ['default', './test/summaryReporter.ts'],
    projects: [
      { extends: true, test: { name: 'sqlite', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...ALONE] } },
      { extends: true, test: { name: 'pg', include: BOTH_STORES.filter((f) => !ALONE.includes(f)), env: pg } },
      // Group 1 runs after group 0 has finished; maxWorkers 1: one file at a time.
      { extends: true, test: { name: 'sqlite-alone', include: ALONE, maxWorkers: 1, isolate: true, sequence: { groupOrder: 1 } } },
      { extends: true, test: { name: 'pg-alone', include: BOTH_STORES.filter((f) => ALONE.includes(f)), env: pg, maxWorkers: 1, isolate: true, sequence: { groupOrder: 1 } } },
    ],
  },
});
