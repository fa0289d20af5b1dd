// What the observation says in status: leader, term, voters, members, version. Pure functions,
// written by the observer with a merge patch.
import type { Condition, MemberStatus, Phase, QueenClusterStatus } from '../crd/schema.ts';
import { clusterCatalogue, finalizationText, versionsSeen } from '../plan/door.ts';
import { memberOf, type Observation, podAt } from '../plan/observation.ts';
import { behindSince, type StallMemory } from '../plan/stalls.ts';
import { canonicalJson, imageTag } from './resources.ts';

/**
 * The version a pod runs: what its broker says on /health, else its image's tag (an image pinned
 * by digest alone has none: its version is known once the broker answers).
 */
export function podVersion(obs: Observation, ordinal: number): string | null {
  const h = obs.health[ordinal];
  if (h?.version) return h.version;
  const image = podAt(obs, ordinal)?.image;
  return image ? imageTag(image) : null;
}

/**
 * status.version (the VERSION column): the version every pod reports. While the pods run two
 * versions, both, old to new, with how many pods run the new one (`2.6.0→2.6.1 (1/3)`); the new one
 * is the version of the pods on the wanted template, or the spec's before any pod is on it. A pod
 * silent while it restarts is named by its image's tag (podVersion), so the first and the last
 * restart of an upgrade still show both (`2.6.0→2.6.1 (0/3)` while the first pod stops and its
 * successor starts), but only the pods that answer are counted. Empty while a pod is silent and no
 * two versions can be told apart.
 */
export function commonVersion(obs: Observation, podCount: number): string {
  // What the brokers say, and each pod's version (a silent one's by its image).
  const known: string[] = [];
  const named: string[] = [];
  for (let i = 0; i < podCount; i++) {
    const said = obs.health[i]?.version;
    if (said) known.push(said);
    const v = podVersion(obs, i);
    if (v) named.push(v);
  }
  const distinct = [...new Set(known)];
  if (distinct.length === 1 && known.length === podCount) return distinct[0]!;
  // Which is the new one: the one the pods of the wanted template run; before any pod does (the
  // first pod of an upgrade stopping), the one the spec asks for.
  const onWanted = new Set(
    obs.pods.filter((p) => p.ordinal < podCount && p.hash === obs.wantedHash).map((p) => podVersion(obs, p.ordinal)).filter((v): v is string => !!v),
  );
  const upgrading = obs.pods.some((p) => p.ordinal < podCount && p.hash !== obs.wantedHash);
  if (upgrading && onWanted.size === 0 && obs.wantedVersion) {
    onWanted.add(obs.wantedVersion);
    named.push(obs.wantedVersion);
  }
  const both = [...new Set(named)];
  if (both.length !== 2) return '';
  const next = both.find((v) => onWanted.has(v) && onWanted.size === 1);
  if (!next) return '';
  const old = both.find((v) => v !== next)!;
  return `${old}→${next} (${known.filter((v) => v === next).length}/${podCount})`;
}

/** The image version a pod runs, as status.versions keys it: its image's tag (spec.version), else what its broker says. */
export function recordedVersion(obs: Observation, ordinal: number): string | null {
  const image = podAt(obs, ordinal)?.image;
  return (image ? imageTag(image) : null) ?? (obs.health[ordinal]?.version || null);
}

/**
 * The door's part of the status: the cluster's catalogue version (never lower than recorded),
 * what each version's build reads (merged into what was recorded) and whether the version the
 * pods run (`version`, status.version) is finalized.
 */
export function doorStatus(recorded: Pick<QueenClusterStatus, 'clusterVersion' | 'versions'> | undefined, obs: Observation, version: string, now: Date) {
  const clusterVersion = clusterCatalogue(obs, recorded?.clusterVersion);
  const versions = versionsSeen(recorded?.versions, obs, recordedVersion, now);
  return { clusterVersion, versions, finalization: finalizationText({ obs, version, clusterVersion, versions }) };
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** One entry per pod ordinal of the StatefulSet, and per member without a pod. */
export function memberStatuses(obs: Observation, memory: StallMemory): MemberStatus[] {
  const podCount = Math.max(obs.statefulSet?.replicas ?? 0, obs.voters, ...obs.pods.map((p) => p.ordinal + 1));
  const ids = new Set<number>();
  for (let i = 0; i < podCount; i++) ids.add(i + 1);
  for (const m of obs.membership?.members ?? []) ids.add(m.nodeId);
  return [...ids]
    .sort((a, b) => a - b)
    .map((nodeId) => {
      const ordinal = nodeId - 1;
      const pod = podAt(obs, ordinal);
      const member = memberOf(obs.membership, nodeId);
      const entry: MemberStatus = {
        nodeId,
        pod: `${obs.name}-${ordinal}`,
        voter: !!member?.voter,
        learner: !!member && !member.voter,
        live: !!member?.live,
        ready: !!pod?.ready,
        lag: member?.lag ?? null,
        matched: member?.matched ?? null,
        behindSince: member ? iso(behindSince(memory, nodeId, member.lag)) : null,
        restarts: pod?.restarts ?? 0,
        lastExitCode: pod?.lastExitCode ?? null,
      };
      const version = podVersion(obs, ordinal);
      if (version && obs.health[ordinal]) entry.version = version;
      // What its build reads: its own /health, else what the leader heard from it.
      const kinds = obs.health[ordinal]?.kinds ?? member?.kinds ?? null;
      if (typeof kinds === 'number') entry.kinds = kinds;
      return entry;
    });
}

/** The observed part of the status. Without a leader's view, leader and term are null rather than stale. */
export function observedStatus(obs: Observation, memory: StallMemory): Partial<QueenClusterStatus> {
  const podCount = Math.max(obs.statefulSet?.replicas ?? 0, obs.voters);
  const out: Partial<QueenClusterStatus> = {
    version: commonVersion(obs, podCount),
    members: memberStatuses(obs, memory),
    leader: obs.membership?.leader ?? null,
    term: obs.membership?.term ?? null,
  };
  if (obs.membership) {
    out.voters = obs.membership.voters;
    out.learners = obs.membership.learners;
  }
  return out;
}

/**
 * What the observer compares a status with its last write on: a change in it is worth a write (and
 * a watch event to every watcher of the object); noise is not. Left out: what only a probe writes
 * (a look with a probe writes anyway), the conditions' transition times, and a member's matched
 * index, which moves with every write. A member's lag counts only as near the leader (within
 * `nearEntries`: the broker's promoteMaxLag, or the operator's caught-up bound if larger) or by its
 * order of magnitude beyond, and its behindSince only once the node has been behind without moving
 * for half of `stallAfterMs`: under client load a follower's lag and its last move change at every
 * look (at 200 pushes a second a follower a second behind is 200 entries behind, and a loaded
 * machine moves it across 100 and back within seconds). Every field is written exact with any
 * change and with each probe, so it is at most a probe interval old.
 */
export function comparableStatus(status: Partial<QueenClusterStatus>, opts: { nearEntries: number; stallAfterMs: number; now: number }): string {
  const lagClass = (lag: number | null | undefined) =>
    lag === null || lag === undefined ? null : lag <= opts.nearEntries ? 'near' : `1e${Math.floor(Math.log10(lag))}`;
  const standing = (since: string | null | undefined) => (since && opts.now - Date.parse(since) >= opts.stallAfterMs / 2 ? since : null);
  return canonicalJson({
    ...status,
    lastProbeTime: undefined,
    commits: undefined,
    lastProbeError: undefined,
    members: status.members?.map((m) => ({ ...m, matched: undefined, lag: lagClass(m.lag), behindSince: standing(m.behindSince) })),
    conditions: status.conditions?.map((c) => ({ ...c, lastTransitionTime: undefined })),
  });
}

export const READY_MESSAGE = 'every voter is in place and the cluster commits';
export const STANDBY_READY_MESSAGE = 'every voter is in place and the standby follows its source';

export interface ConditionInput {
  phase: Phase;
  message: string;
  /** The operation running, if one does: its type and the step it is on. */
  operation: { type: string; step?: string | null } | null;
  /** The pause annotation holds. */
  paused: boolean;
  generation: number | undefined;
  now: Date;
}

/**
 * The conditions tools read (kstatus conventions, as Flux and Argo CD read them), from the phase:
 * - Ready: True only in phase Ready, and Standby (a standby that follows its source);
 * - Progressing and Reconciling: True while an operation runs (reason: its type), or while the
 *   cluster is Degraded and the operator waits for it to recover (reason: Degraded), or Fenced by a
 *   switchover that runs on its standby (reason: Fenced);
 * - Stalled: True when Blocked (only a person can decide);
 * - Paused: True while the queenmq.com/pause annotation holds.
 * A condition's transition time moves only when its status flips.
 */
export function clusterConditions(prev: Condition[] | undefined, c: ConditionInput): Condition[] {
  const at = c.now.toISOString();
  const make = (type: string, on: boolean, reason: string, message: string): Condition => {
    const old = prev?.find((x) => x.type === type);
    const status = on ? 'True' : 'False';
    return { type, status, reason, message, observedGeneration: c.generation, lastTransitionTime: old && old.status === status ? old.lastTransitionTime : at };
  };
  const operating = c.operation !== null;
  // A fenced source waits for the switchover that fenced it (it runs on its standby's object).
  const degraded = c.phase === 'Degraded' || c.phase === 'Fenced';
  const progressReason = operating ? c.operation!.type : degraded ? c.phase : 'Idle';
  const progressMessage = operating ? (c.operation!.step ?? c.message) : degraded ? c.message : 'no operation runs';
  // A standby at rest is ready for what it is: it follows its source.
  const ready = c.phase === 'Ready' || c.phase === 'Standby';
  return [
    make('Ready', ready, c.phase, c.phase === 'Ready' ? READY_MESSAGE : c.phase === 'Standby' ? STANDBY_READY_MESSAGE : c.message),
    make('Progressing', operating || degraded, progressReason, progressMessage),
    make('Reconciling', operating || degraded, progressReason, progressMessage),
    make('Stalled', c.phase === 'Blocked', c.phase === 'Blocked' ? 'Blocked' : 'NotStalled', c.phase === 'Blocked' ? c.message : ''),
    make('Paused', c.paused, c.paused ? 'PauseAnnotation' : 'NotPaused', c.paused ? 'the queenmq.com/pause annotation holds the next disruptive step' : ''),
  ];
}
