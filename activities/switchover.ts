// The steps of Switchover (workflows/switchover.ts), a planned switch from a source to its standby
// in this Kubernetes cluster that loses nothing (test/sim/LINK.md section 5: the broker has no
// fence, so the operator takes the source out of its clients' reach, waits for the standby to read
// its last entry, stops it, promotes the standby; the old source becomes a standby of the new
// primary through a seed, its volumes emptied). Each step can run again after a crash.
import { withDefaults } from '../crd/defaults.ts';
import { ANNOTATIONS, GROUP, PLURAL, VERSION, type QueenCluster } from '../crd/schema.ts';
import { goDuration, podsText } from '../plan/format.ts';
import { standbyProbe } from '../plan/link.ts';
import { loadCluster, observeCluster, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { holdUntil } from './waits.ts';
import { inEndpoints, setServing } from './drain.ts';
import { deleteClaimByUid, getCluster, isConflict, isNotFound, listClaims, listPods, patchClusterAnnotations, patchClusterStatus, rawRequest } from './kube.ts';
import { names, parseOrdinal } from './resources.ts';

/** The source of a switchover: a QueenCluster of this Kubernetes cluster. */
export interface SourceRef {
  namespace: string;
  name: string;
  uid: string;
}

/** How long the source's pods are given to stop (they have nothing left to hand over). */
const STOP_GRACE_S = 1;

/** How many looks in a row the standby must have read everything the source applied. */
const CAUGHT_UP_LOOKS = 3;

const key = (r: Pick<SourceRef, 'namespace' | 'name'>) => `${r.namespace}/${r.name}`;

async function patchSpec(deps: ActivityDeps, r: Pick<SourceRef, 'namespace' | 'name'>, spec: Record<string, unknown>): Promise<void> {
  await rawRequest(deps.kube.kc, 'PATCH', `/apis/${GROUP}/${VERSION}/namespaces/${r.namespace}/${PLURAL}/${r.name}`, { spec }, 'application/merge-patch+json');
}

/** The source as it is now; a deleted or re-created one ends the switchover. */
async function loadSource(deps: ActivityDeps, source: SourceRef): Promise<QueenCluster> {
  return loadCluster(deps, source);
}

export function switchoverActivities(deps: ActivityDeps) {
  return {
    /** The pair is ready: the source is a QueenCluster here, no operation of its runs, the standby follows it. */
    async checkSwitchover(ref: ClusterRef): Promise<{ source: SourceRef }> {
      return holdUntil<{ source: SourceRef }>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const c = qc.spec.standby?.source.cluster;
        const by = key(ref);
        if (!c) return { hold: { phase: 'Blocked', message: 'a switchover needs the source as a QueenCluster of this Kubernetes cluster (spec.standby.source.cluster)', gate: 'standby-follows' } };
        const src = { namespace: c.namespace ?? ref.namespace, name: c.name };
        const sq = await getCluster(deps.kube, src.namespace, src.name);
        if (!sq) return { hold: { phase: 'Blocked', message: `the source QueenCluster ${key(src)} does not exist: there is nothing to switch over from`, gate: 'standby-follows' } };
        if (sq.status?.fence && sq.status.fence.by !== by) {
          return { hold: { phase: 'Blocked', message: `the source ${key(src)} is fenced by the switchover to ${sq.status.fence.by}`, gate: 'source-fenced' } };
        }
        const source = { ...src, uid: sq.metadata.uid ?? '' };
        if (sq.status?.fence) return { done: { source } };
        if (sq.status?.operation) {
          return { hold: { phase: 'SwitchingOver', message: `waiting for the source's ${sq.status.operation.type} to end before the switchover`, gate: 'no-change-in-flight' } };
        }
        const obs = await observeCluster(deps, qc);
        if (obs.link?.role === 'promoted') return { done: { source } };
        const probe = standbyProbe(obs, qc.spec, ref.namespace);
        if (!probe.ok) return { hold: { phase: 'SwitchingOver', message: `waiting for the standby to follow its source: ${probe.error}`, gate: 'standby-follows' } };
        await stepEvent(deps, qc, 'SwitchoverChecked', `the standby follows ${key(src)}: switching over to it`);
        return { done: { source } };
      });
    },

    /**
     * The source stops taking writes: marked fenced (its observer and watcher then start nothing
     * and put none of its pods back), its pods out of its client Services' endpoints, then the
     * requests in flight on them given the drain wait. Returns when the fence began (ms).
     */
    async fenceSource(ref: ClusterRef, source: SourceRef): Promise<number> {
      const by = key(ref);
      const sq = await loadSource(deps, source);
      let since = sq.status?.fence?.since;
      if (!since) {
        since = new Date().toISOString();
        const message = `taken out of its clients' reach by the switchover to ${by}: it becomes a standby of it`;
        await patchClusterStatus(deps.kube, source.namespace, source.name, { fence: { by, since }, phase: 'Fenced', message });
      }
      const fencedAt = Date.parse(since);
      const pods = (await listPods(deps.kube, source.namespace, source.name)).filter((p) => !p.metadata?.deletionTimestamp);
      const targets = pods.map((p) => ({ ordinal: parseOrdinal(source.name, p.metadata!.name!), name: p.metadata!.name!, uid: p.metadata!.uid!, ip: p.status?.podIP ?? null }));
      for (const t of targets) await setServing(deps.kube, source.namespace, t, false);
      const which = podsText(targets.map((t) => t.ordinal).sort((a, b) => a - b));
      const qc = await loadCluster(deps, ref);
      await stepEvent(deps, qc, 'FenceSource', `taking ${which} of ${key(source)} out of its client Service: the source takes no more writes through it`);
      const fast: ActivityDeps = { ...deps, settings: { ...deps.settings, pollMs: 100 } };
      const services = [names.clientService(source.name)];
      await holdUntil<true>(fast, ref, async () => {
        await loadCluster(deps, ref);
        const still: number[] = [];
        for (const t of targets) if (await inEndpoints(deps.kube, source.namespace, services, t)) still.push(t.ordinal);
        if (still.length > 0) {
          return { hold: { phase: 'SwitchingOver', message: `taking the source out of its clients' reach: waiting for ${podsText(still)} of ${key(source)} to leave its client Service`, gate: 'source-fenced' } };
        }
        const left = deps.settings.drainMs - (Date.now() - fencedAt);
        if (left > 0) return { hold: { phase: 'SwitchingOver', message: `taking the source out of its clients' reach: letting the requests in flight on ${key(source)} finish`, gate: 'requests-drained', lookAgainAt: Date.now() + left } };
        return { done: true };
      });
      return fencedAt;
    },

    /** A switchover cancelled before the source stopped: the source takes its clients again. */
    async unfenceSource(ref: ClusterRef, source: SourceRef): Promise<void> {
      const sq = await getCluster(deps.kube, source.namespace, source.name);
      if (!sq || sq.metadata.uid !== source.uid || sq.status?.fence?.by !== key(ref)) return;
      for (const p of await listPods(deps.kube, source.namespace, source.name)) {
        if (!p.metadata?.deletionTimestamp) await setServing(deps.kube, source.namespace, { name: p.metadata!.name!, uid: p.metadata!.uid! }, true);
      }
      await patchClusterStatus(deps.kube, source.namespace, source.name, { fence: null });
      await stepEvent(deps, await loadCluster(deps, ref), 'UnfenceSource', `${key(source)} takes its clients again: the switchover was cancelled before it stopped`);
    },

    /** Until the standby has read everything the source applied, CAUGHT_UP_LOOKS looks in a row. */
    async awaitCaughtUp(ref: ClusterRef, source: SourceRef): Promise<number> {
      let streak = 0;
      return holdUntil<number>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const [obs, sobs] = await Promise.all([observeCluster(deps, qc), loadSource(deps, source).then((sq) => observeCluster(deps, sq))]);
        const applied = Math.max(0, ...Object.values(sobs.health).map((h) => h.applied));
        const f = obs.link?.leader ? obs.link.follower : null;
        const read = f ? Math.max(f.scanned, obs.link?.position?.index ?? 0) : 0;
        const ok = applied > 0 && !!f && f.state === 'following' && f.lagEntries === 0 && read >= applied;
        streak = ok ? streak + 1 : 0;
        if (streak >= CAUGHT_UP_LOOKS) {
          await stepEvent(deps, qc, 'StandbyCaughtUp', `the standby read the source's last entry (${applied})`);
          return { done: applied };
        }
        const where = f ? `it has read up to entry ${read}, the source applied ${applied}` : "its leader does not say where it is";
        return { hold: { phase: 'SwitchingOver', message: `waiting for the standby to read the source's last entry: ${where}`, gate: 'standby-caught-up', lookAgainAt: Date.now() + 300 } };
      });
    },

    /** The source's pods go (its StatefulSet at 0 pods); its volumes stay until the standby is promoted. */
    async stopSource(ref: ClusterRef, source: SourceRef): Promise<void> {
      const path = `/apis/apps/v1/namespaces/${source.namespace}/statefulsets/${names.statefulSet(source.name)}`;
      let said = false;
      await holdUntil<true>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        if (!said) {
          said = true;
          await stepEvent(deps, qc, 'StopSource', `stopping the pods of ${key(source)}: its volumes stay until the standby is promoted`);
        }
        // Fenced and read to its last entry, the source has nothing left to hand over: its pods
        // are deleted with a grace of a second (not through their preStop and drain: the clients'
        // write downtime goes on meanwhile), then its StatefulSet keeps none. A pod being deleted is
        // not made again before it is gone, and by then the StatefulSet asks for none.
        const pods = await listPods(deps.kube, source.namespace, source.name);
        for (const p of pods) {
          if ((p.metadata?.deletionGracePeriodSeconds ?? Infinity) <= STOP_GRACE_S) continue;
          try {
            await deps.kube.core.deleteNamespacedPod({ namespace: source.namespace, name: p.metadata!.name!, body: { gracePeriodSeconds: STOP_GRACE_S, preconditions: { uid: p.metadata!.uid! } } });
          } catch (err) {
            if (!isNotFound(err) && !isConflict(err)) throw err;
          }
        }
        try {
          await rawRequest(deps.kube.kc, 'PATCH', path, { spec: { replicas: 0 } }, 'application/merge-patch+json');
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
        const left = pods.map((p) => parseOrdinal(source.name, p.metadata!.name!));
        if (left.length === 0) return { done: true };
        return { hold: { phase: 'SwitchingOver', message: `stopping the source: waiting for ${podsText(left.sort((a, b) => a - b))} of ${key(source)} to go`, gate: 'pod-gone' } };
      });
    },

    /**
     * The old source becomes a standby of the new primary. The broker makes a cluster a standby
     * only when it is empty or seeded, so its volumes go first (each claim by its UID), then its
     * StatefulSet; then its spec names the new primary as its source (with the link token it
     * served) and, last, its status is cleared: the operator forms it again as a seeded standby.
     */
    async demoteSource(ref: ClusterRef, source: SourceRef): Promise<void> {
      const qc = await loadCluster(deps, ref);
      const sq = await loadSource(deps, source);
      const by = key(ref);
      if (!sq.status?.fence && sq.spec.standby?.source.cluster?.name === ref.name) return;
      for (const claim of await listClaims(deps.kube, source.namespace)) {
        if (parseOrdinal(source.name, claim.metadata?.name ?? '', 'data-') < 0 || claim.metadata?.deletionTimestamp) continue;
        await deleteClaimByUid(deps.kube, source.namespace, claim.metadata!.name!, claim.metadata!.uid!);
      }
      try {
        await deps.kube.apps.deleteNamespacedStatefulSet({ namespace: source.namespace, name: names.statefulSet(source.name), body: { propagationPolicy: 'Background' } });
      } catch (err) {
        if (!isNotFound(err) && !isConflict(err)) throw err;
      }
      const token = sq.spec.link?.tokenSecret ?? withDefaults(qc.spec).standby!.tokenSecret;
      const here = source.namespace === ref.namespace ? { name: ref.name } : { name: ref.name, namespace: ref.namespace };
      await patchSpec(deps, source, { standby: { source: { cluster: here }, tokenSecret: token, seed: true } });
      await patchClusterStatus(deps.kube, source.namespace, source.name, {
        fence: null,
        voters: [],
        role: 'standby',
        standby: null,
        phase: 'Forming',
        message: `starting again as a standby of ${by}`,
      });
      const words = `${key(source)} starts again as a standby of ${by}: its volumes were emptied and its node 1 takes a seed of the new primary`;
      await stepEvent(deps, qc, 'DemoteSource', words);
      await stepEvent(deps, sq, 'DemotedBySwitchover', words);
    },

    /**
     * The new primary's spec says it is a source (spec.link), the annotation goes, and the clients'
     * write downtime as the operator saw it is returned (from the fence to now, just after the
     * first write on the new primary).
     */
    async finishSwitchover(ref: ClusterRef, fencedAt: number): Promise<string> {
      const qc = await loadCluster(deps, ref);
      // The token it served as a standby is its spec.link now: its pods already have it
      // (QUEEN_LINK_TOKEN), and a standby's NetworkPolicy already lets a standby's pods in, so
      // nothing it renders changes and no pod restarts. spec.standby stays, as where it came from:
      // a promoted cluster ignores it, as its brokers do.
      if (!qc.spec.link && qc.spec.standby) await patchSpec(deps, ref, { link: { tokenSecret: qc.spec.standby.tokenSecret } });
      if (qc.metadata.annotations?.[ANNOTATIONS.switchover] !== undefined) await patchClusterAnnotations(deps.kube, ref.namespace, ref.name, { [ANNOTATIONS.switchover]: null });
      return goDuration(Math.max(0, Date.now() - fencedAt));
    },
  };
}
