// The operator's tunables, shared by the worker (activities) and the watcher.
import type { BrokerAccessMode } from './observe.ts';

export interface Settings {
  /** How the operator reaches a pod's broker port: its DNS name (in the cluster) or its pod IP. */
  brokerAccess: BrokerAccessMode;
  /** How often a waiting step looks again. */
  pollMs: number;
  /** How often the observer looks at a cluster, and how long one observer activity runs. */
  observeIntervalMs: number;
  observeRunMs: number;
  /** How often the resting write probe runs (COMMITS). */
  probeIntervalMs: number;
  /** A voter behind the leader whose `matched` has not moved for this long is stalled. */
  stallAfterMs: number;
  /** A voter is caught up for the stop gate when at most this many entries behind. */
  caughtUpEntries: number;
  /** How long an upgrade waits for the cluster to settle after its last restart. */
  settleTimeoutMs: number;
  /**
   * Before a node leaves the membership or its pod goes for good: how long its pod stays up once
   * it is out of the client Services' endpoints, for the clients to see that and for the requests
   * in flight on it to finish (activities/drain.ts).
   */
  drainMs: number;
}

export const DEFAULT_SETTINGS: Settings = {
  brokerAccess: 'dns',
  pollMs: 2000,
  observeIntervalMs: 10_000,
  observeRunMs: 10 * 60_000,
  probeIntervalMs: 60_000,
  stallAfterMs: 10_000,
  caughtUpEntries: 100,
  settleTimeoutMs: 10 * 60_000,
  drainMs: 2000,
};
