// The steps of PromoteStandby (workflows/promote-standby.ts): where the standby stands in its
// source (and what a promotion now would lose, as the broker reports it), the promotion itself
// (any node takes it; asked again it is a no-op), and the record of it in status. The broker's
// side is test/sim/LINK.md section 4.
import { readAnnotations } from '../crd/annotations.ts';
import { withDefaults } from '../crd/defaults.ts';
import { ANNOTATIONS, type QueenCluster } from '../crd/schema.ts';
import { goDuration } from '../plan/format.ts';
import { SOURCE_SILENT_MS, sourceName, type LinkObservation } from '../plan/link.ts';
import type { Observation } from '../plan/observation.ts';
import { brokerToken, loadCluster, observeCluster, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { holdUntil } from './waits.ts';
import { patchClusterAnnotations, patchClusterStatus } from './kube.ts';
import { promoteLink } from './link.ts';
import { brokerBase } from './observe.ts';

/** Where the standby stood when it was promoted, and what the broker said it had not read. */
export interface StandbyPosition {
  /** It was promoted already (a step repeated after a crash, or a promotion by hand). */
  already: boolean;
  source: string;
  /** The last source entry applied, and when the source wrote it (ms). */
  position: number;
  positionAt: number | null;
  /** Entries the source had applied and the standby had not read, at the source's last answer. */
  unread: number | null;
  /** When the source last answered (ms), if ever. */
  lastAnswerAt: number | null;
}

/** A time of day with milliseconds, as the Events say it (UTC). */
export const clock = (ms: number) => new Date(ms).toISOString().slice(11, 23);

/** The promotion's loss bound, in one line (the Event, the switchover's and the promotion's own). */
export function lossWords(p: StandbyPosition, now: number): string {
  const at = p.positionAt ? `, written at ${clock(p.positionAt)}` : '';
  const kept = p.positionAt ? ': what the source committed up to then is here, what it committed after is lost' : '';
  const stands = `the standby stands at entry ${p.position} of its source${at}${kept}`;
  if (p.lastAnswerAt === null) return `${stands} (its source never answered it)`;
  const ago = goDuration(Math.max(0, now - p.lastAnswerAt));
  const unread = p.unread ?? 0;
  return `${stands} (when the source last answered, ${ago} ago, the node it read had ${unread} ${unread === 1 ? 'entry' : 'entries'} more)`;
}

/** The position from the standby's leader's link status. */
function positionOf(link: LinkObservation, source: string, now: number): StandbyPosition {
  const f = link.follower;
  return {
    already: link.role === 'promoted',
    source,
    position: link.position?.index ?? 0,
    positionAt: link.position?.at || null,
    unread: f ? f.lagEntries : null,
    lastAnswerAt: f && f.lastAnswerMs !== null ? now - f.lastAnswerMs : null,
  };
}

/** The pods a promotion is asked of: the leader first, then every other that answers. */
function askOrder(obs: Observation): number[] {
  const leader = obs.membership?.leader ? obs.membership.leader - 1 : null;
  const answering = obs.pods.filter((p) => p.running && !p.terminating && obs.health[p.ordinal]).map((p) => p.ordinal);
  return [...(leader !== null && answering.includes(leader) ? [leader] : []), ...answering.filter((o) => o !== leader)];
}

export function promoteActivities(deps: ActivityDeps) {
  return {
    /**
     * Where the standby stands in its source, from its leader. A promotion asked with `true` waits
     * (Blocked) while the source still answers the standby: two clusters would take writes.
     */
    async standbyPosition(ref: ClusterRef): Promise<StandbyPosition> {
      return holdUntil<StandbyPosition>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const obs = await observeCluster(deps, qc);
        const source = sourceName(qc.spec, ref.namespace);
        const link = obs.link;
        if (!link || !link.leader) {
          return { hold: { phase: 'Promoting', message: "waiting for the standby's leader: only a standby with a leader can be promoted", gate: 'leader-known' } };
        }
        if (link.role === 'primary') {
          return { hold: { phase: 'Blocked', message: `${ref.name} is not a standby: there is nothing to promote; remove the ${ANNOTATIONS.promote} annotation`, gate: 'source-stopped' } };
        }
        const p = positionOf(link, source, obs.at);
        const asked = readAnnotations(qc.metadata.annotations).promote;
        const answers = p.lastAnswerAt !== null && obs.at - p.lastAnswerAt < SOURCE_SILENT_MS && link.follower?.state === 'following';
        if (!p.already && asked === 'true' && answers) {
          return {
            hold: {
              phase: 'Blocked',
              message:
                `the source ${source} still answers the standby (${goDuration(obs.at - p.lastAnswerAt!)} ago): a promotion now would make two clusters ` +
                `that take writes; stop the source, ask for a switchover (${ANNOTATIONS.switchover}=true), or annotate ${ANNOTATIONS.promote}=force`,
              gate: 'source-stopped',
            },
          };
        }
        await stepEvent(deps, qc, 'PromotePosition', p.already ? `the standby was promoted already, at entry ${p.position} of its source` : lossWords(p, obs.at));
        return { done: p };
      });
    },

    /** POST /api/v1/system/link/promote through the leader, else any pod; a no-op when done already. */
    async promoteStandbyNodes(ref: ClusterRef, p: StandbyPosition): Promise<{ position: number; via: number }> {
      return holdUntil<{ position: number; via: number }>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const obs = await observeCluster(deps, qc);
        const spec = withDefaults(qc.spec);
        const token = await brokerToken(deps, qc);
        const errors: string[] = [];
        for (const ordinal of askOrder(obs)) {
          const base = brokerBase(deps.settings.brokerAccess, qc, spec, obs.pods.find((x) => x.ordinal === ordinal)!);
          if (!base) continue;
          const r = await promoteLink(base, ordinal, token);
          if (r.ok) {
            const position = r.link.position?.index ?? p.position;
            await stepEvent(deps, qc, 'Promoted', `promoted through pod ${ordinal}: the cluster takes writes; it holds its source's log up to entry ${position}`);
            return { done: { position, via: ordinal } };
          }
          if (r.notStandby) {
            return { hold: { phase: 'Blocked', message: `${ref.name} is not a standby: there is nothing to promote; remove the ${ANNOTATIONS.promote} annotation`, gate: 'source-stopped' } };
          }
          errors.push(r.error);
        }
        return { hold: { phase: 'Promoting', message: `promoting the standby: ${errors.length ? errors.join('; ') : 'no pod answers'}`, gate: 'leader-known' } };
      });
    },

    /** Records the promotion in status (role promoted, where it stood) and removes the annotation. */
    async finishPromotion(ref: ClusterRef, p: StandbyPosition, planned: boolean): Promise<void> {
      const qc: QueenCluster = await loadCluster(deps, ref);
      const promoted = qc.status?.standby?.promoted ?? {
        at: new Date().toISOString(),
        position: p.position,
        positionTime: p.positionAt ? new Date(p.positionAt).toISOString() : null,
        unreadEntries: p.unread,
        lastAnswerAt: p.lastAnswerAt ? new Date(p.lastAnswerAt).toISOString() : null,
        planned,
      };
      await patchClusterStatus(deps.kube, ref.namespace, ref.name, { role: 'promoted', standby: { ...(qc.status?.standby ?? {}), state: 'promoted', promoted } });
      if (qc.metadata.annotations?.[ANNOTATIONS.promote] !== undefined) await patchClusterAnnotations(deps.kube, ref.namespace, ref.name, { [ANNOTATIONS.promote]: null });
    },
  };
}
