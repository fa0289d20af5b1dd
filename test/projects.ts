// The test bed's files that do not run in the `testbed` project (vitest.config.ts), named once for
// the config, `npm test` (test/run.ts) and `npm run e2e` (test/e2e/run.ts).

/** Scenarios that act on a whole test bed node (stop, cordon or drain it): the `testbed-alone` project. */
export const ALONE: readonly string[] = ['test/testbed/nodes.test.ts', 'test/e2e/upgrade-drain.test.ts'];

/** Scenarios that install the operator cluster-wide, each in a test bed of its own: the `cluster-wide` project. */
export const CLUSTER_WIDE: readonly string[] = ['test/e2e/install.test.ts', 'test/e2e/helm.test.ts'];
