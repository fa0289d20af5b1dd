// The cluster link in the operator's terms (test/sim/LINK.md): what the standby's leader says of
// the link, read into status.standby and status.role, the phase a standby rests in (Standby while
// it follows, Degraded with the source's address and the cause while it does not), and what stands
// for a write probe on a standby (it takes no client write: its replay of the source committing is
// what "it commits" means there). Pure functions of the observation.
import { readAnnotations } from '../crd/annotations.ts';
import { ANNOTATIONS, type QueenCluster, type QueenClusterSpec, type QueenClusterStatus } from '../crd/schema.ts';
import type { Assessment } from './assess.ts';
import type { Observation } from './observation.ts';

/** What the standby's follower says (GET /api/v1/system/link, its `follower` block). */
export interface FollowerObservation {
  state: string;
  source: string;
  scanned: number;
  sourceApplied: number;
  lagEntries: number;
  lagMs: number;
  lastAnswerMs: number | null;
  error: string | null;
}

/** A node's link status (GET /api/v1/system/link). */
export interface LinkObservation {
  /** The pod that answered, and whether its node leads (only the standby's leader follows). */
  via: number;
  leader: boolean;
  role: 'primary' | 'standby' | 'promoted';
  id: string | null;
  /** The last source entry applied: index, term, and when the source wrote it (ms). */
  position: { index: number; term: number; at: number } | null;
  follower: FollowerObservation | null;
  /** The standbys that read this node's log. */
  readers: { name: string; after: number; idleMs: number }[];
  /** When it was promoted (ms), once it was. */
  promotedAt: number | null;
}

/** A follower that has not heard from its source for this long does not follow. */
export const SOURCE_SILENT_MS = 10_000;

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

export function parseLinkStatus(via: number, json: unknown): LinkObservation | null {
  const j = json as Record<string, unknown> | undefined;
  if (!j || typeof j.role !== 'string' || !['primary', 'standby', 'promoted'].includes(j.role)) return null;
  const p = j.position as Record<string, unknown> | undefined;
  const f = j.follower as Record<string, unknown> | undefined;
  return {
    via,
    leader: j.leader === true,
    role: j.role as LinkObservation['role'],
    id: typeof j.id === 'string' ? j.id : null,
    position: p && num(p.index) !== null ? { index: num(p.index)!, term: num(p.term) ?? 0, at: Math.round((num(p.nowUs) ?? 0) / 1000) } : null,
    follower: f
      ? {
          state: typeof f.state === 'string' ? f.state : 'idle',
          source: typeof f.source === 'string' ? f.source : '',
          scanned: num(f.scanned) ?? 0,
          sourceApplied: num(f.sourceApplied) ?? 0,
          lagEntries: num(f.lagEntries) ?? 0,
          lagMs: num(f.lagMs) ?? 0,
          lastAnswerMs: num(f.lastAnswerMs),
          error: typeof f.error === 'string' ? f.error : null,
        }
      : null,
    readers: Array.isArray(j.readers)
      ? (j.readers as Record<string, unknown>[]).map((r) => ({ name: String(r.name ?? ''), after: num(r.after) ?? 0, idleMs: num(r.idleMs) ?? 0 }))
      : [],
    promotedAt: num(j.promotedAtUs) === null ? null : Math.round(num(j.promotedAtUs)! / 1000),
  };
}

/** What the standby names as its source, in words: namespace/name of a QueenCluster, or the addresses. */
export function sourceName(spec: Pick<QueenClusterSpec, 'standby'>, namespace: string): string {
  const src = spec.standby?.source;
  if (!src) return '';
  if (src.cluster) return `${src.cluster.namespace ?? namespace}/${src.cluster.name}`;
  return (src.addresses ?? []).join(',');
}

/** status.role: a standby (or one on its way: the spec says so before the brokers do), promoted, a source that is read, or primary. */
export function linkRole(obs: Pick<Observation, 'link'>, spec: Pick<QueenClusterSpec, 'standby' | 'link'>): NonNullable<QueenClusterStatus['role']> {
  const l = obs.link;
  if (l?.role === 'standby' || l?.role === 'promoted') return l.role;
  if (!l && spec.standby) return 'standby';
  if (l && l.readers.length > 0) return 'source';
  return 'primary';
}

const iso = (ms: number | null | undefined) => (ms ? new Date(ms).toISOString() : null);

/** status.standby from the standby's leader's link status (null on a cluster that is not one and never was). */
export function standbyStatus(obs: Pick<Observation, 'link' | 'at'>, spec: Pick<QueenClusterSpec, 'standby'>, namespace: string, prev?: QueenClusterStatus['standby']): QueenClusterStatus['standby'] {
  if (!spec.standby && obs.link?.role !== 'promoted') return prev?.promoted ? { promoted: prev.promoted } : null;
  const l = obs.link;
  const f = l?.follower;
  // Only the standby's leader follows: another node's view says nothing of the follower.
  const leading = !!l?.leader;
  const out: NonNullable<QueenClusterStatus['standby']> = {
    source: sourceName(spec, namespace),
    state: l?.role === 'promoted' ? 'promoted' : leading && f ? f.state : 'unknown',
    reading: leading && f ? f.source : '',
    position: l?.position?.index ?? null,
    lagEntries: leading && f && l?.role === 'standby' ? f.lagEntries : null,
    lagSeconds: leading && f && l?.role === 'standby' ? Math.round(f.lagMs) / 1000 : null,
    lastAppliedAt: iso(l?.position?.at),
    lastAnswerAt: leading && f && f.lastAnswerMs !== null ? iso(obs.at - f.lastAnswerMs) : null,
    error: leading && f ? f.error : null,
  };
  if (prev?.promoted) out.promoted = prev.promoted;
  return out;
}

/**
 * Why a standby does not follow its source, in one line, with the Secret of the link token when
 * the source refuses it; null while it follows.
 */
export function notFollowing(obs: Pick<Observation, 'link'>, spec: Pick<QueenClusterSpec, 'standby'>, namespace: string): string | null {
  const l = obs.link;
  if (!l || l.role !== 'standby') return null;
  const source = sourceName(spec, namespace);
  if (!l.leader || !l.follower) return `the standby's leader does not say how it follows its source ${source}`;
  const f = l.follower;
  const refused = /QUEEN_LINK_SOURCE_TOKEN|serves no link/.test(f.error ?? '');
  const secret = spec.standby?.tokenSecret;
  const token = refused && secret ? `; the link token is key ${secret.key} of Secret ${secret.name}: it must hold the source's QUEEN_LINK_TOKEN (its spec.link.tokenSecret)` : '';
  if (f.state === 'halted') return `the standby stopped following its source ${source}: ${f.error ?? 'it needs a new seed'}`;
  if (f.state === 'waiting' && (f.lastAnswerMs === null || f.lastAnswerMs > SOURCE_SILENT_MS || refused)) {
    return `the standby's source ${source} does not answer it: ${f.error ?? 'no answer'}${token}`;
  }
  return null;
}

/**
 * The phase a standby rests in, once nothing else holds it: Degraded while it does not follow its
 * source (with the Secret of the link token when the source refuses it), else Standby.
 */
export function standbyAssessment(obs: Pick<Observation, 'link'>, spec: Pick<QueenClusterSpec, 'standby'>, namespace: string): Assessment | null {
  if (!spec.standby) return null;
  if (obs.link?.role === 'primary' && obs.link.follower) {
    // The brokers ignore a standby's configuration on a cluster with data of its own (LINK.md section 1).
    return {
      phase: 'Blocked',
      message:
        `this cluster is configured as a standby of ${sourceName(spec, namespace)} but holds data of its own, so its brokers keep it an ordinary ` +
        'cluster: a standby starts empty or from a seed of its source; create a new QueenCluster for the standby, or remove spec.standby',
      reason: 'standby-follows',
    };
  }
  if (obs.link?.role !== 'standby') return null;
  const why = notFollowing(obs, spec, namespace);
  return why ? { phase: 'Degraded', message: why, reason: 'standby-follows' } : { phase: 'Standby', message: '' };
}

/**
 * A standby (by its spec, never promoted) whose link role is not read yet: no leader answers the
 * link, or the node that leads has not applied the role row yet (a node that joined a seeded
 * standby reports 'primary' until it has). Its brokers take no client write: the write probe waits
 * for the link instead of sending one that a standby refuses.
 */
export function standbyLinkUnread(obs: Pick<Observation, 'link'>, spec: Pick<QueenClusterSpec, 'standby'>, status: Pick<QueenClusterStatus, 'role'> | undefined): boolean {
  if (!spec.standby || status?.role === 'promoted') return false;
  const l = obs.link;
  return !l || (l.role === 'primary' && !l.follower);
}

/**
 * What stands for the write probe on a standby, which takes no client write: its leader replays
 * its source (each replayed entry commits in the standby's own log before the next is read).
 */
export function standbyProbe(obs: Pick<Observation, 'link'>, spec: Pick<QueenClusterSpec, 'standby'>, namespace: string): { ok: true } | { ok: false; error: string } {
  const source = sourceName(spec, namespace);
  const why = notFollowing(obs, spec, namespace);
  if (why) return { ok: false, error: why };
  if (obs.link?.follower?.state !== 'following') return { ok: false, error: `the standby does not follow its source ${source} yet (${obs.link?.follower?.state ?? 'no leader'})` };
  return { ok: true };
}

/**
 * COMMITS of a standby from a look: its probe is the look itself (standbyProbe, no write is sent),
 * so a status written with how the standby follows says whether it commits in the same write, not
 * a probe interval later (a standby shown following with COMMITS false from before it followed).
 * Null for a look of a cluster that is not a standby.
 */
export function standbyProbeStatus(
  obs: Pick<Observation, 'link'>,
  spec: Pick<QueenClusterSpec, 'standby'>,
  namespace: string,
  at: Date,
): Pick<QueenClusterStatus, 'commits' | 'lastProbeTime' | 'lastProbeError'> | null {
  if (obs.link?.role !== 'standby') return null;
  const probe = standbyProbe(obs, spec, namespace);
  return { commits: probe.ok, lastProbeTime: at.toISOString(), lastProbeError: probe.ok ? null : probe.error };
}

/** status.role and status.standby from a look (only for a cluster that is, or was, part of a link). */
export function linkStatusOf(obs: Pick<Observation, 'link' | 'at' | 'namespace'>, spec: Pick<QueenClusterSpec, 'standby' | 'link'>, prev: QueenClusterStatus | undefined): Pick<QueenClusterStatus, 'role' | 'standby'> | null {
  if (obs.link === undefined && !prev?.role) return null;
  const role = obs.link === undefined ? (prev?.role === 'promoted' ? 'promoted' : 'primary') : linkRole(obs, spec);
  return { role, standby: standbyStatus(obs, spec, obs.namespace, prev?.standby) };
}

/** The link's operations: the promotion of a standby, and a switchover to it. */
export function linkNeed(qc: Pick<QueenCluster, 'metadata' | 'spec' | 'status'>): { type: 'PromoteStandby' | 'Switchover'; fingerprint: string; target: string } | null {
  const asked = readAnnotations(qc.metadata.annotations);
  if (linkRefusal(qc)) return null;
  if (asked.promote) return { type: 'PromoteStandby', fingerprint: `promote:${asked.promote}`, target: 'an ordinary cluster' };
  if (asked.switchover && qc.spec.standby?.source.cluster) {
    return { type: 'Switchover', fingerprint: `switchover:${sourceName(qc.spec, qc.metadata.namespace)}`, target: `the primary in place of ${sourceName(qc.spec, qc.metadata.namespace)}` };
  }
  return null;
}

/** A link request that cannot be done, in one line (Blocked, nothing starts); null when none. */
export function linkRefusal(qc: Pick<QueenCluster, 'metadata' | 'spec' | 'status'>): string | null {
  const asked = readAnnotations(qc.metadata.annotations);
  const role = qc.status?.role ?? (qc.spec.standby ? 'standby' : 'primary');
  const name = qc.metadata.name;
  if (asked.promote && role !== 'standby' && role !== 'promoted') {
    return `${name} is not a standby: there is nothing to promote; remove the ${ANNOTATIONS.promote} annotation`;
  }
  if (asked.switchover && !asked.promote) {
    if (role !== 'standby') return `${name} is not a standby: a switchover is asked of the standby that is to become the primary; remove the ${ANNOTATIONS.switchover} annotation`;
    if (!qc.spec.standby?.source.cluster) {
      return (
        `a switchover needs the source as a QueenCluster of this Kubernetes cluster (spec.standby.source.cluster), which the operator can take out of ` +
        `its clients' reach: with a source elsewhere, stop it, then annotate ${ANNOTATIONS.promote}=true; remove the ${ANNOTATIONS.switchover} annotation`
      );
    }
  }
  if (!qc.spec.standby && role === 'standby' && !asked.promote) {
    return (
      `spec.standby was removed, but the cluster is still a standby and refuses every write: promote it first ` +
      `(${ANNOTATIONS.promote}=true, or ${ANNOTATIONS.switchover}=true), or set spec.standby again`
    );
  }
  return null;
}

/** The standbys of `source` among `all` (QueenClusters naming it in spec.standby.source.cluster), with the version each runs. */
export function standbysOf(source: Pick<QueenCluster, 'metadata'>, all: Pick<QueenCluster, 'metadata' | 'spec' | 'status'>[]): { name: string; version: string }[] {
  return all
    .filter((q) => {
      const c = q.spec.standby?.source.cluster;
      return !!c && c.name === source.metadata.name && (c.namespace ?? q.metadata.namespace) === source.metadata.namespace && q.status?.role !== 'promoted';
    })
    .map((q) => ({ name: `${q.metadata.namespace}/${q.metadata.name}`, version: q.status?.version || q.spec.version }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** -1, 0, 1 for two versions of numbers and dots (2.6.0 < 2.6.1 < 2.10.0); null when either is something else. */
export function compareVersions(a: string, b: string): number | null {
  const parse = (v: string) => (/^v?\d+(\.\d+)*$/.test(v) ? v.replace(/^v/, '').split('.').map(Number) : null);
  const x = parse(a);
  const y = parse(b);
  if (!x || !y) return null;
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  return 0;
}

/**
 * An upgrade of a source to a version newer than one of its standbys runs: refused until the
 * standby runs it (a source entry that raises the cluster version waits until every node of the
 * standby reads it, and its replay stops meanwhile: LINK.md section 3).
 */
export function standbyBehind(qc: Pick<QueenCluster, 'spec' | 'status'>): string | null {
  const behind = (qc.status?.standbys ?? []).find((s) => (compareVersions(qc.spec.version, s.version ?? '') ?? 0) > 0);
  if (!behind) return null;
  return (
    `the standby ${behind.name} runs ${behind.version}: upgrade it to ${qc.spec.version} first; a source on a newer version can write ` +
    'entries its standby does not read yet, and its replay would stop'
  );
}
