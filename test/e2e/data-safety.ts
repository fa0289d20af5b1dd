// What the data-safety scenarios share (replace-gate, scale-down-cancel, replace-unannotated): the
// brokers' Raft logs followed from their volumes (test/chaos/membership.ts, as the chaos cells read
// them), a change policy that refuses to delete volume claims, the claims' UIDs, and the step Events
// said since a moment.
import type { CoreV1Event } from '@kubernetes/client-node';
import { changeKey, followMembership, type MembershipLog } from '../chaos/membership.ts';
import { clusterEvents, refuseByPolicy, type Scenario } from './harness.ts';

/** The Event reasons of the membership and volume steps. */
export const DATA_STEPS = ['ReplaceStarted', 'RemoveMember', 'WipeVolume', 'AddLearner', 'Promote', 'ReplaceFinished', 'ScalePods', 'DeleteClaim', 'RestartPod'];

/** The brokers' Raft logs of the scenario's cluster, followed until the scenario closes. */
export async function raftLog(s: Scenario): Promise<MembershipLog> {
  const log = await followMembership(s.ns);
  s.onClose(async () => log.stop());
  return log;
}

/** The membership changes the configuration entries after index `after` made, in their order ("remove 2", "learner 2", ...). */
export async function changesSince(log: MembershipLog, after: number): Promise<string[]> {
  await log.poll();
  return log.changes(after).map(changeKey);
}

/** The UID of the volume claim of pod `ordinal`, or null when there is none. */
export async function claimUid(s: Scenario, ordinal: number): Promise<string | null> {
  try {
    return (await s.core.readNamespacedPersistentVolumeClaim({ namespace: s.ns, name: `data-queen-${ordinal}` })).metadata?.uid ?? null;
  } catch {
    return null;
  }
}

/** A change policy of the cluster that refuses to delete volume claims in the scenario's namespace (403). */
export const freezeClaimDeletes = (s: Scenario) =>
  refuseByPolicy(s, 'keep-claims', { apiGroup: '', operation: 'DELETE', resource: 'persistentvolumeclaims' }, 'volume claims are kept by the change policy');

/** How often each step Event has been said until now (its count), to tell later ones apart. */
export async function eventCounts(s: Scenario): Promise<Map<string, number>> {
  return new Map((await clusterEvents(s)).map((e: CoreV1Event) => [e.metadata!.name!, e.count ?? 1]));
}

/** The step Events said since `seen` (Event counts then), "Reason: message", in the order they were last said. */
export async function stepsSince(s: Scenario, seen: Map<string, number>): Promise<string[]> {
  return (await clusterEvents(s))
    .filter((e) => DATA_STEPS.includes(e.reason ?? '') && (e.count ?? 1) > (seen.get(e.metadata!.name!) ?? 0))
    .map((e) => `${e.reason}: ${e.message}`);
}
