// The pure rules of backups: whose volume a backup takes, what a backup is named, which backups a
// Schedule deletes past spec.backup.keep. No I/O: the activities observe, these decide.
import type { QueenCluster } from '../crd/schema.ts';
import { memberOf, podAt, type Observation } from './observation.ts';
import type { GateName } from './gates.ts';

export interface BackupSource {
  ordinal: number;
  nodeId: number;
  /** The node's term and commit index as its /health answered in the same look. */
  term: number;
  commit: number;
  /** Why this node: a caught-up follower, or the leader when no follower is. */
  why: string;
  /** The cluster's voters then (a backup of one voter is restored only under its cluster's name). */
  voters?: number[];
}

export type SourceChoice = { source: BackupSource } | { wait: string; gate: GateName };

/**
 * The node whose volume a backup takes: a follower the leader sees live and caught up (within
 * `caughtUpEntries`), Ready and answering, the most caught up first; the leader only when no
 * follower is (a cluster of one, or followers behind). Never a voter that is behind: a copy of
 * its volume would miss what the cluster committed without it. The nodes of `lastResort` are taken
 * only when no other can be: node 1 of a cluster formed from a backup carries the broker's mark of
 * its forced recovery, and a copy of its volume cannot be recovered from again.
 */
export function backupSource(obs: Observation, caughtUpEntries: number, lastResort: readonly number[] = []): SourceChoice {
  const m = obs.membership;
  if (!m || m.leader === null) return { wait: 'waiting for a leader: no node answers with the membership', gate: 'leader-known' };
  if (m.changeInFlight || m.joint) return { wait: 'waiting for the membership change in flight to finish', gate: 'no-change-in-flight' };
  const usable = (nodeId: number) => {
    const pod = podAt(obs, nodeId - 1);
    const health = obs.health[nodeId - 1];
    return !!pod && pod.running && pod.ready && !pod.terminating && !!health && health.healthy ? health : null;
  };
  const followers = m.voters
    .filter((id) => id !== m.leader)
    .map((id) => ({ id, member: memberOf(m, id), health: usable(id) }))
    .filter((f) => f.member?.live && f.member.lag !== null && f.member.lag <= caughtUpEntries && f.health)
    .sort((a, b) => Number(lastResort.includes(a.id)) - Number(lastResort.includes(b.id)) || (b.member!.matched ?? 0) - (a.member!.matched ?? 0) || a.id - b.id);
  const leaderUsable = usable(m.leader);
  const best = followers[0] && (!lastResort.includes(followers[0].id) || !leaderUsable || lastResort.includes(m.leader)) ? followers[0] : undefined;
  if (best) {
    return { source: { ordinal: best.id - 1, nodeId: best.id, term: best.health!.term, commit: best.health!.commit, why: `a caught-up follower (${best.member!.lag} entries behind the leader)`, voters: m.voters } };
  }
  const leaderHealth = leaderUsable;
  if (leaderHealth) {
    const why = m.voters.length === 1 ? 'the only voter' : 'the leader: no follower is live and caught up';
    return { source: { ordinal: m.leader - 1, nodeId: m.leader, term: leaderHealth.term, commit: leaderHealth.commit, why, voters: m.voters } };
  }
  return { wait: `waiting for a voter to take the volume of: no follower is live and caught up, and the leader's pod ${m.leader - 1} is not Ready`, gate: 'backup-source-caught-up' };
}

/** A backup's name: the cluster's, and the moment (UTC) its workflow began, as 20261206-143000. */
export function backupName(cluster: string, at: Date): string {
  const iso = at.toISOString(); // 2026-12-06T14:30:00.000Z
  return `${cluster}-${iso.slice(0, 10).replaceAll('-', '')}-${iso.slice(11, 19).replaceAll(':', '')}`;
}

export interface BackupListing {
  name: string;
  phase: string | null;
  /** ms since the epoch: when it was taken, else when it was created. */
  at: number;
}

/**
 * The scheduled backups past `keep`: the newest `keep` ready ones stay, older ready ones go; a
 * failed one goes once a ready one is newer than it (the newest failure stays to be read until a
 * backup succeeds after it); one still being taken stays.
 */
export function backupsPastKeep(backups: BackupListing[], keep: number): string[] {
  const newestFirst = [...backups].sort((a, b) => b.at - a.at || b.name.localeCompare(a.name));
  const ready = newestFirst.filter((b) => b.phase === 'Ready');
  const gone = ready.slice(keep).map((b) => b.name);
  const newestReady = ready[0]?.at ?? -Infinity;
  for (const b of newestFirst) if (b.phase === 'Failed' && b.at < newestReady) gone.push(b.name);
  return gone;
}

/**
 * The cluster forms from a backup (spec.bootstrap.fromBackup) and its recovery is not over: its
 * FormCluster is the restore (workflows/restore-cluster.ts). Once status.restore.recoveredAt is
 * written, forming it again (its StatefulSet deleted) is an ordinary formation on its claims.
 */
export const restoring = (qc: Pick<QueenCluster, 'spec' | 'status'>): boolean => !!qc.spec.bootstrap?.fromBackup && !qc.status?.restore?.recoveredAt;
