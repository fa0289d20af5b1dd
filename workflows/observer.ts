// The per-cluster observer: it runs as long as its QueenCluster exists. Each round is one
// heartbeating activity that observes for a while (health, membership, the write probe, status);
// its state goes from round to round and, after a number of rounds, into a new run of the
// workflow (continue-as-new), so the history stays bounded.
import { continueAsNew, proxyActivities } from '@temporalio/workflow';
import type { Activities, ClusterRef } from '../activities/index.ts';
import type { ObserverState } from '../activities/observer.ts';

const { observeClusterStatus } = proxyActivities<Activities>({
  summary: 'observe the cluster',
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: '60 seconds',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

/** Rounds before the workflow continues as new (each round is a few history events). */
export const ROUNDS_PER_RUN = 50;

export async function clusterObserver(ref: ClusterRef, state: ObserverState | null = null): Promise<string> {
  for (let round = 0; round < ROUNDS_PER_RUN; round++) {
    const run = await observeClusterStatus(ref, state);
    if (run.gone) return `the QueenCluster ${ref.namespace}/${ref.name} is gone`;
    state = run.state;
  }
  return continueAsNew<typeof clusterObserver>(ref, state);
}
