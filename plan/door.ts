// The one-way door of a Queen upgrade. Each build reads an effect catalogue up to a version of its
// own (/health raft.kinds); the cluster is at a catalogue version (raft.clusterVersion), which its
// leader raises by itself once every member runs a build that reads a higher one, and which never
// goes down. A build that reads less than the cluster's version refuses to start on its data. So a
// version change (a revert of spec.version, a rollback) whose build reads less than the cluster is
// at would crash-loop the first pod it restarts: it is refused before any pod stops.
//
// What a version's build reads is learned from the brokers, never from its version string: once a
// pod of it has run and answered /health, status.versions keeps what it said. A version that has
// not run here is not known, and does not hold anything back.
import { readAnnotations } from '../crd/annotations.ts';
import { withDefaults } from '../crd/defaults.ts';
import type { QueenCluster } from '../crd/schema.ts';
import type { Observation } from './observation.ts';
import { listText } from './format.ts';

/**
 * Whether the pods hold the cluster version where it is (QUEEN_RAFT_CLUSTER_VERSION_MS=0 on them:
 * the leader never raises it; the broker reads the setting once, at boot): with
 * spec.upgrade.finalize Manual, until the queenmq.com/finalize annotation names spec.version.
 */
export function holdsClusterVersion(qc: Pick<QueenCluster, 'spec' | 'metadata'>): boolean {
  const spec = withDefaults(qc.spec);
  return spec.upgrade.finalize === 'Manual' && readAnnotations(qc.metadata.annotations).finalize !== spec.version;
}

/** What the pods of one image version said their build reads: an entry of status.versions. */
export interface VersionRead {
  version: string;
  kinds: number;
  /** When a pod of it last said so (ISO 8601). */
  seenAt?: string;
}

/** The versions status.versions keeps: the newest seen, this many at most. */
export const VERSIONS_KEPT = 8;

/**
 * The image version a pod runs, as the record is keyed: its image's tag (what spec.version names),
 * else the version its broker reports (an image pinned by digest alone has no tag).
 */
export type PodVersionOf = (obs: Observation, ordinal: number) => string | null;

/**
 * status.versions after an observation: each answering pod's version with what its build reads,
 * merged into what was recorded (a version seen again is updated; the others are kept, the newest
 * VERSIONS_KEPT of them). The same list, in the same order, when nothing new was seen.
 */
export function versionsSeen(recorded: readonly VersionRead[] | null | undefined, obs: Observation, versionOf: PodVersionOf, now: Date): VersionRead[] {
  const byVersion = new Map<string, VersionRead>((recorded ?? []).map((r) => [r.version, { ...r }]));
  const running = new Set<string>();
  for (const [key, h] of Object.entries(obs.health)) {
    if (typeof h.kinds !== 'number') continue;
    const version = versionOf(obs, Number(key));
    if (!version) continue;
    running.add(version);
    const had = byVersion.get(version);
    // Seen again with the same reading: kept as it was (no status write for it at every look).
    if (had && had.kinds === h.kinds) continue;
    byVersion.set(version, { version, kinds: h.kinds, seenAt: now.toISOString() });
  }
  // The versions running now, then the others seen last; sorted by version.
  const newer = (a: VersionRead, b: VersionRead) => Number(running.has(b.version)) - Number(running.has(a.version)) || ((b.seenAt ?? '') > (a.seenAt ?? '') ? 1 : -1);
  return [...byVersion.values()]
    .sort(newer)
    .slice(0, VERSIONS_KEPT)
    .sort((a, b) => a.version.localeCompare(b.version, undefined, { numeric: true }));
}

/**
 * The catalogue version the cluster is at: the highest a broker reports (a node that has not
 * applied the raise yet reports the one before), and never less than the one recorded: the
 * version never goes down. Null when nothing is known.
 */
export function clusterCatalogue(obs: Observation, recorded: number | null | undefined): number | null {
  let v = typeof recorded === 'number' ? recorded : null;
  for (const h of Object.values(obs.health)) {
    if (typeof h.clusterVersion === 'number' && (v === null || h.clusterVersion > v)) v = h.clusterVersion;
  }
  return v;
}

/** What the build of `version` reads, as its pods said; null when no pod of it has run here. */
export function readsOf(versions: readonly VersionRead[] | null | undefined, version: string): number | null {
  return versions?.find((r) => r.version === version)?.kinds ?? null;
}

/** A version whose build cannot start on the cluster: it reads less than the cluster is at. */
export interface ClosedDoor {
  version: string;
  reads: number;
  clusterVersion: number;
  /** Versions seen here whose builds can start on it, the newest reading first. */
  canStart: string[];
}

/** The door for `version`: closed when its build is known to read less than the cluster is at; null otherwise. */
export function closedDoor(version: string, versions: readonly VersionRead[] | null | undefined, clusterVersion: number | null): ClosedDoor | null {
  const reads = readsOf(versions, version);
  if (reads === null || clusterVersion === null || reads >= clusterVersion) return null;
  const canStart = (versions ?? [])
    .filter((r) => r.kinds >= clusterVersion)
    .sort((a, b) => b.kinds - a.kinds || b.version.localeCompare(a.version, undefined, { numeric: true }))
    .map((r) => r.version);
  return { version, reads, clusterVersion, canStart };
}

/**
 * The door for `version` on a cluster: its build's reading as status.versions recorded it (the
 * observer writes it at every look), against the cluster's catalogue version (the recorded one, or
 * a higher one a broker reports now).
 */
export function versionDoor(
  status: { clusterVersion?: number | null; versions?: readonly VersionRead[] | null } | null | undefined,
  obs: Observation,
  version: string,
): ClosedDoor | null {
  return closedDoor(version, status?.versions, clusterCatalogue(obs, status?.clusterVersion));
}

/** "2.6.0 cannot start on this cluster: its build reads catalogue version 6 and the cluster is at 7". */
export function cannotStartText(d: ClosedDoor): string {
  return `${d.version} cannot start on this cluster: its build reads catalogue version ${d.reads} and the cluster is at ${d.clusterVersion}`;
}

/** The version every pod runs (status.version), or null while they run two. */
export const runningVersion = (status: { version?: string | null } | null | undefined): string | null =>
  status?.version && !status.version.includes('→') ? status.version : null;

/** What a person can do: name a version whose build can start (the one the pods run, when it can). */
function wayForward(d: ClosedDoor, ref: { namespace: string; name: string }, running: string | null): string {
  const to = running && d.canStart.includes(running) ? running : d.canStart[0];
  const any = `a version whose build reads ${d.clusterVersion} or more`;
  if (!to) return `set spec.version to ${any}`;
  return `set spec.version back to ${to} (or to ${any}): kubectl -n ${ref.namespace} patch queencluster ${ref.name} --type merge -p '{"spec":{"version":"${to}"}}'`;
}

/** The Blocked line of a version change refused by the door: no pod is stopped. */
export function versionRefusedText(d: ClosedDoor, ref: { namespace: string; name: string }, running: string | null): string {
  return `${cannotStartText(d)}: no pod is stopped; ${wayForward(d, ref, running)}`;
}

/**
 * The Blocked line of a rollback the door makes impossible: no pod goes back. `holds`: said of an
 * upgrade that holds on its failure (onFailure Hold) rather than one that tried to roll back.
 */
export function rollbackRefusedText(d: ClosedDoor, failedVersion: string, reason: string, how: 'failed' | 'holds' = 'failed'): string {
  return (
    `the upgrade to ${failedVersion} ${how}: ${reason}; it cannot roll back: ${cannotStartText(d)}, and no pod goes back to it; ` +
    `set spec.version to a version whose build reads ${d.clusterVersion} or more (a fixed ${failedVersion})`
  );
}

/**
 * Whether the pods' version is finalized, in one line, when every pod runs one version and says
 * what its build reads: "2.7.0, not finalized: the way back to 2.6.0 is open" while the cluster
 * is at a lower catalogue version than that build reads, "2.7.0, finalized at catalogue version
 * 7" (and which versions seen here can no longer start) once it is not. Null otherwise.
 */
export function finalizationText(input: {
  obs: Observation;
  /** The version every pod runs (status.version), or '' while they differ. */
  version: string;
  clusterVersion: number | null;
  versions: readonly VersionRead[];
}): string | null {
  const { obs, version, clusterVersion } = input;
  if (!version || clusterVersion === null || version.includes('→')) return null;
  // The lowest reading of the pods' builds: what the leader can raise the cluster to.
  let reads: number | null = null;
  for (const p of obs.pods) {
    if (p.terminating) continue;
    const k = obs.health[p.ordinal]?.kinds;
    if (typeof k !== 'number') return null;
    reads = reads === null ? k : Math.min(reads, k);
  }
  if (reads === null) return null;
  const others = input.versions.filter((r) => r.version !== version);
  if (reads > clusterVersion) {
    const open = others.filter((r) => r.kinds >= clusterVersion && r.kinds < reads!).map((r) => r.version);
    if (open.length === 0) return `${version}, not finalized: the cluster stays at catalogue version ${clusterVersion} while its build reads ${reads}`;
    return `${version}, not finalized: the way back to ${listText(open)} is open`;
  }
  const closed = others.filter((r) => r.kinds < clusterVersion).map((r) => `${r.version} (reads ${r.kinds})`);
  return `${version}, finalized at catalogue version ${clusterVersion}${closed.length ? `: ${listText(closed)} can no longer start on it` : ''}`;
}

/**
 * What an upgrade to spec.version does to the door, for the plan: whether the leader raises the
 * cluster's catalogue version once every pod runs it (and what can no longer start then), or
 * whether it stays where it is (spec.upgrade.finalize Manual). Null when nothing changes.
 */
export function raiseNote(qc: Pick<QueenCluster, 'spec' | 'metadata' | 'status'>, obs: Observation): string | null {
  const version = withDefaults(qc.spec).version;
  const at = clusterCatalogue(obs, qc.status?.clusterVersion);
  if (at === null) return null;
  const reads = readsOf(qc.status?.versions, version);
  if (reads !== null && reads <= at) return null;
  const older = (qc.status?.versions ?? []).filter((r) => r.version !== version && (reads === null || r.kinds < reads)).map((r) => r.version);
  const lost = older.length ? listText(older) : 'versions whose builds read less';
  if (holdsClusterVersion(qc)) {
    return `the cluster stays at catalogue version ${at} (spec.upgrade.finalize: Manual): the way back stays open until the queenmq.com/finalize annotation names ${version}`;
  }
  if (reads === null) {
    return (
      `${version} has not run here: if its build reads more than catalogue version ${at}, the leader raises the cluster to it once every pod runs ${version}, ` +
      `and ${lost} cannot start on it after that (spec.upgrade.finalize: Manual keeps the way back open)`
    );
  }
  return (
    `once every pod runs ${version}, the leader raises the cluster from catalogue version ${at} to ${reads}: from then on ${lost} cannot start on it ` +
    `(spec.upgrade.finalize: Manual keeps the way back open)`
  );
}
