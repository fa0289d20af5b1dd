import { join } from 'node:path';
import { defineConfig } from 'vitest/config';
import { ALONE, CLUSTER_WIDE } from './test/projects.ts';
import { LongestFirst } from './test/sequencer.ts';

// Node's compile cache for every process the tests start (vitest's workers, the operators, the
// simulated nodes): a process that loads code compiled once before starts on about half the CPU
// (measured: 0.95 against 1.9 CPU-s for the operator's imports), and the test bed starts hundreds.
process.env.NODE_COMPILE_CACHE ??= join(import.meta.dirname, '.cache', 'node-compile-cache');

// Two projects: `unit` needs nothing running (pure functions, the broker client against a local
// HTTP server, the Queen node simulator as plain processes); `testbed` shares one test bed (a real
// Kubernetes control plane, a Temporal server, simulated nodes) started once by its global setup.
// `unit-fleet` runs the simulator's own tests again with every node in a broker fleet process
// (QUEEN_SIM_MODE=fleet), the way a test bed with fleets runs them.
// Temporal workers and the simulator run in forked processes: vitest's thread pool and the
// Temporal worker do not mix.

export default defineConfig({
  test: {
    pool: 'forks',
    // The longest files first (test/durations.json), so that none starts last and runs alone.
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/sim/**/*.test.ts', 'test/workflows/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'unit-fleet',
          include: ['test/sim/**/*.test.ts'],
          // The fleet's own tests start their fleets whatever the mode: `unit` runs them.
          exclude: ['test/sim/fleet.test.ts'],
          env: { QUEEN_SIM_MODE: 'fleet' },
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'testbed',
          include: ['test/testbed/**/*.test.ts', 'test/e2e/**/*.test.ts'],
          // The cluster-wide installs act on every namespace: they have a test bed of their own. The
          // scenarios that act on a whole node run in `testbed-alone`.
          // npm test leaves out the long scenarios it did not draw (test/long.ts, test/run.ts).
          exclude: [...CLUSTER_WIDE, ...ALONE, ...(process.env.QUEEN_LEAVE_OUT ? process.env.QUEEN_LEAVE_OUT.split(',') : [])],
          // The test bed first, then what the operator needs in it (CRD, RBAC, the workflow bundle).
          globalSetup: ['test/testbed/global-setup.ts', 'test/e2e/global-setup.ts'],
          // A heavy file gives the heavy slot back at its end (test/heavy.ts).
          setupFiles: ['test/e2e/setup.ts'],
          testTimeout: 600_000,
          hookTimeout: 300_000,
        },
      },
      {
        // Scenarios that stop, cordon or drain a test bed node, which every other scenario's pods
        // may run on: npm test runs them after the others, one at a time.
        test: {
          name: 'testbed-alone',
          include: [...ALONE],
          globalSetup: ['test/testbed/global-setup.ts', 'test/e2e/global-setup.ts'],
          testTimeout: 600_000,
          hookTimeout: 300_000,
        },
      },
      {
        // The operator as the README installs it cluster-wide (deploy/install.yaml, the Helm chart),
        // in a test bed of its own: both take the namespace queen-system, the cluster-wide objects
        // and the README's example cluster, and each leaves none behind, so in one run they go one
        // file after the other (npm test runs each in a run, and a test bed, of its own).
        test: {
          name: 'cluster-wide',
          include: [...CLUSTER_WIDE],
          globalSetup: ['test/testbed/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 900_000,
          hookTimeout: 300_000,
        },
      },
      {
        // The chaos matrix and the soak (npm run chaos): not part of npm test, which runs a seeded
        // sample of it (test/e2e/chaos-sample.test.ts). One cell at a time: some faults (the
        // Temporal server, the API server, a node) hit the whole test bed.
        test: {
          name: 'chaos',
          include: ['test/chaos/**/*.chaos.ts'],
          globalSetup: ['test/testbed/global-setup.ts', 'test/e2e/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 12 * 3600_000,
          hookTimeout: 300_000,
        },
      },
      {
        // Benchmarks (npm run bench -- <name>): not part of npm test.
        test: {
          name: 'bench',
          include: ['test/bench/**/*.bench.ts'],
          globalSetup: ['test/testbed/global-setup.ts', 'test/e2e/global-setup.ts'],
          testTimeout: 1_800_000,
          hookTimeout: 300_000,
        },
      },
    ],
  },
});
