// The stop gate as the operations use it, and the one disruptive step they share: stopping a pod.
// Before any pod stops (an upgrade's restart, a leader's hand-off before it leaves or is
// replaced): not paused, every other voter Ready for minReadySeconds (but the pods a fix-forward
// leaves, plan/fix-forward.ts), live and caught up, none stalled, and a write committing through a
// pod that stays. A node leaves the membership through the same gate (the voters that stay must
// carry the cluster without it).
import { heartbeat } from '@temporalio/activity';
import type { V1Pod } from '@kubernetes/client-node';
import { readAnnotations } from '../crd/annotations.ts';
import { withDefaults } from '../crd/defaults.ts';
import type { Phase, QueenCluster } from '../crd/schema.ts';
import { ANNOTATIONS } from '../crd/schema.ts';
import { nonMembersHoldingBudget } from '../plan/budget.ts';
import { fixForward, withFixForward } from '../plan/fix-forward.ts';
import { podsText } from '../plan/format.ts';
import { drainAhead, nodeDownProblem, stopGate, writeGate, type GateOptions } from '../plan/gates.ts';
import { livePodAt, podAt, type Observation } from '../plan/observation.ts';
import type { RestartPick } from '../plan/restarts.ts';
import { restartLine, type EvictionGate } from '../plan/steps.ts';
import { podsToServe } from '../plan/serving.ts';
import { answeringNodes, stallMemoryFromStatus, trackStalls, type StallMemory } from '../plan/stalls.ts';
import { beat, brokerToken, loadCluster, observeCluster, opLogger, probeThrough, stepEvent, watchedCluster, writeStep, type ActivityDeps, type ClusterRef } from './common.ts';
import { accountHeld, ASK_THE_API_SERVER, handOverIfStopping, holdUntil, looksUntil, pause, type Hold } from './waits.ts';
import { DRAIN_LEAD_MS, drainEvent, drainPod, drainPods, drainTarget, leavingPods, nodesLeave, serveAgainExcept, setServing, type DrainTarget } from './drain.ts';
import { budgetsSelecting, deletePodByUid, evictPodByUid, getPod, getStatefulSet, patchClusterStatus, type Kube } from './kube.ts';
import { brokerBase, nodeDown, podObservation, readNodeAtMostEvery } from './observe.ts';
import { readMembership } from './broker.ts';
import { names } from './resources.ts';

/**
 * What to do about a pod that more than one PodDisruptionBudget selects: the Eviction API refuses
 * to evict it at all (it supports one budget a pod), so the restart waits until a person removes
 * the budget that is not the cluster's.
 */
async function sharedBudgetWords(kube: Kube, ref: ClusterRef, pod: V1Pod): Promise<string> {
  const ours = names.disruptionBudget(ref.name);
  const all = await budgetsSelecting(kube, ref.namespace, pod.metadata?.name ?? '').catch(() => [] as string[]);
  const others = all.filter((n) => n !== ours);
  const which = others.length > 0 ? `${others.join(', ')} and ${ours}` : `${ours} and another`;
  return `the Eviction API refuses pods that more than one PodDisruptionBudget selects (${which}); delete ${others.length === 1 ? `the budget ${others[0]}` : 'the budgets that are not the cluster\'s'} (the operator keeps ${ours}: at most one pod of the cluster down)`;
}

export function gateOptions(deps: ActivityDeps, obs: Observation, minReadySeconds: number): GateOptions {
  return {
    minReadyMs: minReadySeconds * 1000,
    stallAfterMs: deps.settings.stallAfterMs,
    caughtUpEntries: Math.min(deps.settings.caughtUpEntries, obs.membership?.promoteMaxLag ?? Infinity),
  };
}

/** The stall memory of each cluster, carried from one look to the next, seeded from status. */
const memories = new Map<string, StallMemory>();
export function stallMemory(qc: QueenCluster, obs: Observation): StallMemory {
  const key = qc.metadata.uid ?? `${qc.metadata.namespace}/${qc.metadata.name}`;
  const next = trackStalls(memories.get(key) ?? stallMemoryFromStatus(qc.status?.members, obs.at), obs.membership, obs.at, answeringNodes(obs));
  memories.set(key, next);
  return next;
}

/** A write probe's result into status (COMMITS): every probe counts, whoever runs it. */
export async function recordProbe(deps: ActivityDeps, ref: Pick<ClusterRef, 'namespace' | 'name'>, probe: { ok: boolean; error?: string }) {
  await patchClusterStatus(deps.kube, ref.namespace, ref.name, {
    commits: probe.ok,
    lastProbeTime: new Date().toISOString(),
    lastProbeError: probe.ok ? null : (probe.error ?? 'the write probe failed'),
  });
}

export interface GateWords {
  phase: Phase;
  /** What comes before the reason, e.g. "pod 1 is next". */
  next: string;
  /**
   * A grow restarts this pod: writes refused at the disk gate (507 storage_full on every pod
   * asked) do not hold it back, because a full disk is not a lost quorum and growing the volume
   * is what opens the gate again. The rest of the gate still holds.
   */
  growing?: boolean;
  /**
   * The pod's drain may begin in the last seconds of the other voters' minimum Ready time (as an
   * upgrade's does), so that its restart follows the gate at once, not a drain later.
   */
  drainAhead?: boolean;
}

/**
 * Why the pod `target` may not stop now (the reason in the README's words), or null. With
 * `removing`, its node is about to leave the membership instead: the same gate, except that its
 * own stall holds nothing back. On a look from the watches (`fromWatch`) no write probe runs: null
 * then says only that the rest of the gate is open, for the look from the API server to finish.
 */
export async function stopHold(
  deps: ActivityDeps,
  qc: QueenCluster,
  obs: Observation,
  target: number,
  words: GateWords,
  opts: { removing?: boolean; fromWatch?: boolean } = {},
): Promise<Hold | null> {
  const removing = opts.removing ?? false;
  if (readAnnotations(qc.metadata.annotations).pause) {
    return { phase: words.phase, message: `${words.next}: paused by the ${ANNOTATIONS.pause} annotation`, gate: 'not-paused' };
  }
  const hold = stopGate({ obs, memory: stallMemory(qc, obs), target, removing, opts: gateOptions(deps, obs, obs.minReadySeconds) });
  if (hold) return { phase: words.phase, message: `${words.next}: ${hold.reason}`, gate: hold.gate, lookAgainAt: hold.liftsAt };
  if (opts.fromWatch) return null;
  const probe = await probeThrough(deps, qc, obs, target);
  await recordProbe(deps, qc.metadata, probe);
  const unwritten = writeGate(probe, words.growing);
  return unwritten && { phase: words.phase, message: `${words.next}, but ${unwritten.reason}`, gate: unwritten.gate };
}

/**
 * The drain of a pod that stops through the stop gate, in the last seconds of the other voters'
 * minimum Ready time: with less than a drain's length of that wait left (and no other gate
 * holding), the pod goes out of the client Services now, so its restart follows the gate at once
 * (restartPod then finds it drained); held longer, the wait looks again when the drain may begin.
 * Every other pod that should serve takes clients again, and so does this one unless it is drained
 * ahead or the gate is open. Which pods serve is decided on the API server's word: a look from the
 * watches that would drain a pod or put one back, or that finds the gate open, hands over to it.
 * Null when the gate is open and the pod may stop.
 */
export async function drainAheadOrHold(
  deps: ActivityDeps,
  ref: ClusterRef,
  qc: QueenCluster,
  obs: Observation,
  ordinal: number,
  hold: Hold | null,
  words: Pick<GateWords, 'phase' | 'next'>,
  fromWatch: boolean,
): Promise<{ hold: Hold } | typeof ASK_THE_API_SERVER | null> {
  const lead = deps.settings.drainMs + DRAIN_LEAD_MS;
  const minReady = hold?.gate === 'pod-ready-for-min-ready-seconds';
  const ahead = minReady && drainAhead({ obs, memory: stallMemory(qc, obs), target: ordinal, opts: gateOptions(deps, obs, obs.minReadySeconds) }, lead);
  // A pod drained at an earlier look stays so: the looks that follow, until the gate lifts, need
  // nothing of the API server.
  const except = ahead || !hold ? ordinal : null;
  const toServe = podsToServe(obs).some((p) => p.ordinal !== except);
  const toDrain = ahead && podAt(obs, ordinal)?.serving !== false;
  if (fromWatch && (!hold || toDrain || toServe)) return ASK_THE_API_SERVER;
  if (toServe) await serveAgainExcept(deps, ref, obs, except);
  const target = toDrain ? drainTarget(obs, ordinal) : null;
  if (target) await drainPod(deps, ref, target, { phase: words.phase, what: words.next, event: drainEvent([target], 'it restarts') });
  if (hold && minReady && !ahead && hold.lookAgainAt !== undefined) return { hold: { ...hold, lookAgainAt: hold.lookAgainAt - lead } };
  return hold ? { hold } : null;
}

export interface RestartWords {
  phase: Phase;
  /** The step's line, in status and as the Event. */
  message: string;
  /**
   * The pod's node leaves the membership after this restart (a hand-off before a scale-down or a
   * replacement removes it): the pods of the other nodes a scale-down removes go out of the client
   * Services with it, in the same drain wait, and the removals after it find them drained
   * already. The restart ends once another node leads: the node leaves next, and nothing waits for
   * its pod's successor.
   */
  leaving?: boolean;
}

/** How often restartPod looks for another leader after stopping a leader whose node leaves next. */
const HAND_OFF_LOOK_MS = 200;

/** How often restartPod's wait for a successor asks the API server while the watches show none. */
const SUCCESSOR_ASK_MS = 5000;

/**
 * The pod of this name as the process's watches have it: null when they have none, undefined
 * when they cannot say (watchedCluster).
 */
function watchedPod(deps: ActivityDeps, ref: ClusterRef, podName: string): V1Pod | null | undefined {
  const watched = watchedCluster(deps, ref);
  if (!watched) return undefined;
  return watched.owned.pods.find((p) => p.metadata?.name === podName) ?? null;
}

export function gateActivities(deps: ActivityDeps) {
  return {
    /**
     * Waits until the pod `ordinal` may stop; returns it as a pick for restartPod, or null when
     * the pod is gone, or (with `whileAnnotated`) when the replace annotation no longer names it.
     */
    async awaitStopGate(ref: ClusterRef, ordinal: number, words: GateWords, whileAnnotated?: string): Promise<RestartPick | null> {
      return holdUntil<RestartPick | null>(deps, ref, async (look) => {
        const qc = await look.cluster();
        if (whileAnnotated !== undefined && readAnnotations(qc.metadata.annotations).replacePod !== whileAnnotated) return { done: null };
        const obs = await look.observe(qc);
        const pod = livePodAt(obs, ordinal);
        if (!pod) return { done: null };
        const hold = await stopHold(deps, qc, obs, ordinal, words, { fromWatch: look.fromWatch });
        if (words.drainAhead) {
          const held = await drainAheadOrHold(deps, ref, qc, obs, ordinal, hold, words, look.fromWatch);
          if (held) return held;
        } else if (hold) {
          return { hold };
        } else if (look.fromWatch) {
          return ASK_THE_API_SERVER;
        }
        return { done: { ordinal, podName: pod.name, podUid: pod.uid, why: 'leader' } };
      });
    },

    /**
     * Restarts one pod: checks the stop gate once more, drains it (activities/drain.ts), checks
     * the gate again, deletes the pod with a UID precondition
     * (a retry never stops its successor) and returns once the StatefulSet has made the successor.
     */
    async restartPod(ref: ClusterRef, pick: RestartPick, words?: RestartWords): Promise<{ restarted: boolean; reason?: string }> {
      const qc = await loadCluster(deps, ref);
      const log = opLogger(deps, ref);
      const said = words ?? { phase: 'Upgrading', message: restartLine(pick.ordinal) };
      const current = await getPod(deps.kube, ref.namespace, pick.podName);
      // A pod of a cluster of several voters is stopped through the Eviction API, which honours the
      // disruption budget and counts against it: a drain or an eviction of another pod at the same
      // moment is refused instead of taking a second voter down. A cluster of one voter, whose
      // budget allows no eviction, has its pod deleted.
      const single = withDefaults(qc.spec).replicas === 1;
      let waiting = '';
      // Which budgets select the pod: asked of the API server at most every 5 s while the eviction is refused for it.
      let budgets = { words: '', at: 0 };
      // The pod drained before it stops (its UID): out of the client Services, the requests in
      // flight on it finished, so that no client is cut off. Put back if it does not stop after all.
      let drained: DrainTarget | null = null;
      let companions: DrainTarget[] = [];
      const undrain = async () => {
        for (const pod of [...(drained ? [drained] : []), ...companions]) await setServing(deps.kube, ref.namespace, pod, true);
        drained = null;
        companions = [];
      };
      // The cluster as the gate saw it last: the pods that stay, which say who leads after a hand-off.
      let seen: Observation | null = null;
      for (let pod = current; pod && pod.metadata?.uid === pick.podUid && !pod.metadata?.deletionTimestamp; pod = await getPod(deps.kube, ref.namespace, pick.podName)) {
        handOverIfStopping(deps);
        // Before the drain the watches serve: the wait that picked the pod looked at the API server
        // a moment ago, and the gate is looked at there again once the pod is drained, before it
        // stops. A hold they show is confirmed by the API server before the restart is given up.
        const watched = drained ? null : watchedCluster(deps, ref);
        const gateOn = (obs: Observation) => stopGate({ obs, memory: stallMemory(qc, obs), target: pick.ordinal, opts: gateOptions(deps, obs, obs.minReadySeconds) });
        let obs = watched ? await observeCluster(deps, watched.cluster, watched.owned) : await observeCluster(deps, qc);
        let hold = gateOn(obs);
        if (hold && watched) hold = gateOn((obs = await observeCluster(deps, qc)));
        seen = obs;
        if (hold) {
          await undrain();
          log.info({ gate: hold.gate }, `not restarting pod ${pick.ordinal}: ${hold.reason}`);
          return { restarted: false, reason: hold.reason };
        }
        // A stop the gate lets through although other pods are not Ready (a fix-forward): the step says why.
        const forward = fixForward(obs, pick.ordinal);
        const message = withFixForward(said.message, forward);
        if (!drained) {
          const target = { ordinal: pick.ordinal, name: pick.podName, uid: pick.podUid, ip: pod.status?.podIP ?? null };
          const others = said.leaving ? leavingPods(qc, obs, pick.ordinal + 1) : [];
          const all = [target, ...others];
          // "taking pods 1 and 2 out of the client Service before pod 2 restarts and nodes 3 and 2 leave the membership"
          const event = others.length === 0 ? drainEvent(all, 'it restarts') : drainEvent(all, `pod ${pick.ordinal} restarts and ${nodesLeave(all)} the membership`);
          const present = await drainPods(deps, ref, all, { phase: said.phase, what: said.message, event });
          companions = present.filter((p) => p.uid !== target.uid);
          if (!present.some((p) => p.uid === target.uid)) break;
          drained = target;
          // The gate is looked at again after the drain, which took a few seconds.
          continue;
        }
        if (!waiting) await writeStep(deps, ref, { phase: said.phase, message, gate: null });
        let r = single
          ? (await deletePodByUid(deps.kube, ref.namespace, pick.podName, pick.podUid)) ? 'evicted' : 'gone'
          : await evictPodByUid(deps.kube, ref.namespace, pick.podName, pick.podUid);
        // The budget refuses a pod the gate let go, for pods it cannot tell apart, so the pod is
        // deleted by its UID; every other eviction is still refused meanwhile, so no drain takes a
        // second voter down beside it. A fix-forward's pod: the budget lets a pod that is not Ready
        // go only while enough others are Ready, which on a build Ready nowhere never comes; the
        // gate has shown what the budget cannot see (the voters that stay live, caught up and
        // committing). Or the budget is short only of pods whose nodes left the membership
        // (plan/budget.ts): they count for no quorum, and every member's pod is Ready.
        if (r === 'refused') {
          const outside = forward ? null : nonMembersHoldingBudget(obs, pick.ordinal);
          const why = forward ? 'short of Ready pods' : outside ? `short of ${podsText(outside)}, whose nodes left the membership` : null;
          if (why) {
            log.info({ gate: 'disruption-budget', pod: pick.podName, ...(outside ? { outside } : {}) }, `${said.message}: the disruption budget, ${why}, refuses its eviction; it is deleted instead`);
            r = (await deletePodByUid(deps.kube, ref.namespace, pick.podName, pick.podUid)) ? 'evicted' : 'gone';
          }
        }
        if (r === 'evicted') {
          log.info({ pod: pick.podName, uid: pick.podUid, why: pick.why }, message);
          await stepEvent(deps, qc, 'RestartPod', message);
        }
        if (r !== 'refused' && r !== 'shared-budget') break;
        if (r === 'shared-budget' && Date.now() - budgets.at >= 5000) budgets = { words: await sharedBudgetWords(deps.kube, ref, pod), at: Date.now() };
        const why = r === 'refused' ? `${said.message}: the disruption budget allows no eviction now (another pod of the cluster is going down, or a budget of your own forbids it)` : `${said.message}: ${budgets.words}`;
        if (why !== waiting) {
          waiting = why;
          log.info({ gate: 'disruption-budget' }, why);
          await writeStep(deps, ref, { phase: said.phase, message: why, gate: 'disruption-budget' });
        }
        heartbeat({ gate: 'disruption-budget', message: why });
        const refusedAt = performance.now();
        await pause(deps, deps.settings.pollMs);
        accountHeld(ref, 'disruption-budget' satisfies EvictionGate, performance.now() - refusedAt);
      }
      // The StatefulSet controller makes the successor once the old pod is gone. Without the
      // QueenCluster (ClusterGone ends the operation) or the StatefulSet, or with a StatefulSet
      // scaled below this pod, none comes: the wait ends, and the operation sees why at its next step.
      // A pod whose node stopped reporting stays Terminating until the node is back: the step says so.
      let stuck = '';
      // The successor is seen in the process's watches first (which wake this wait when it comes),
      // then confirmed by the API server; without one there the API server is asked every
      // SUCCESSOR_ASK_MS, for what the watches may not show (the StatefulSet gone, a node down).
      // Right after the eviction it has nothing to say yet.
      let askedAt = Date.now();
      // While the pod waits for its node (stuck), the time goes to the gate pod-gone.
      let lookedAt = performance.now();
      return looksUntil<{ restarted: boolean; reason?: string }>(deps, ref, async () => {
        const now = performance.now();
        if (stuck) accountHeld(ref, 'pod-gone' satisfies EvictionGate, now - lookedAt);
        lookedAt = now;
        // A leader stopped so that it hands leadership away before its node leaves: done once
        // another node leads. Its node leaves next; its pod's last moments and its successor (which
        // goes with the pods above the voters) are nobody's wait.
        if (said.leaving && (await handedOff())) return { result: { restarted: true } };
        const watched = watchedPod(deps, ref, pick.podName);
        const successorSeen = watched !== undefined && watched !== null && watched.metadata?.uid !== pick.podUid;
        if (watched === undefined || successorSeen || Date.now() - askedAt >= SUCCESSOR_ASK_MS) {
          askedAt = Date.now();
          const done = await lookForSuccessor();
          if (done) return { result: done };
        }
        beat({ waitingFor: said.leaving ? `another leader than node ${pick.ordinal + 1}` : `the successor of ${pick.podName}` });
        // (A hand-off shows only in the brokers' view, which no watch wakes this for: it completes within a second.)
        return { againInMs: said.leaving ? HAND_OFF_LOOK_MS : Math.min(deps.settings.pollMs, 1000) };
      });

      /** Whether a pod that stays sees another node than the stopped pod's lead (the leader's view, relayed by any member). */
      async function handedOff(): Promise<boolean> {
        if (!seen) return false;
        const spec = withDefaults(qc.spec);
        const token = await brokerToken(deps, qc);
        for (const p of seen.pods) {
          if (p.ordinal === pick.ordinal || p.terminating || !p.running) continue;
          const base = brokerBase(deps.settings.brokerAccess, qc, spec, p);
          const view = base ? await readMembership(base, 1000, token) : null;
          if (view && view.leader !== null) return view.leader !== pick.ordinal + 1;
        }
        return false;
      }

      /** One look at the API server: the result once the successor is there (or none comes), else null. */
      async function lookForSuccessor(): Promise<{ restarted: boolean; reason?: string } | null> {
        await loadCluster(deps, ref);
        const pod = await getPod(deps.kube, ref.namespace, pick.podName);
        if (pod && pod.metadata?.uid !== pick.podUid) return { restarted: true };
        if (!pod) {
          const sts = await getStatefulSet(deps.kube, ref.namespace, names.statefulSet(ref.name));
          if (!sts || sts.metadata?.deletionTimestamp) {
            log.info({ pod: pick.podName }, `pod ${pick.ordinal} stopped; no successor comes: the StatefulSet ${ref.name} is gone`);
            return { restarted: true, reason: `the StatefulSet ${ref.name} is gone` };
          }
          if ((sts.spec?.replicas ?? 0) <= pick.ordinal) return { restarted: true, reason: `the StatefulSet ${ref.name} has fewer pods than ${pick.ordinal + 1}` };
        } else if (pod.spec?.nodeName) {
          const node = await readNodeAtMostEvery(deps.kube, pod.spec.nodeName);
          const old = podObservation(ref.name, pod);
          const problem = old && node ? nodeDownProblem({ ...old, nodeDown: nodeDown(node) }) : null;
          const message = problem ? `${said.message}: ${problem}` : '';
          if (message !== stuck) {
            stuck = message;
            if (message) log.info({ gate: 'pod-gone' }, message);
            await writeStep(deps, ref, { phase: said.phase, message: message || said.message, gate: message ? 'pod-gone' : null });
          }
        }
        return null;
      }
    },
  };
}
