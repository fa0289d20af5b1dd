// The per-cluster observer: health and membership mirrored into status, the write probe behind
// COMMITS once a probe interval (also when no pod has a leader view), Degraded and Blocked with
// their reason when no operation runs. A voter change left half done (a joint configuration whose
// leader died between the two steps) is finished here, whatever runs.
//
// A cluster at rest holds no activity slot of the worker and costs the API server nothing but its
// own status writes: each round of the observer workflow is one activity that hands itself to the
// process's rounds and completes asynchronously (the slot is free at once), looks at the cluster
// every observe interval from the process's watches, heartbeats its state through the Temporal
// client now and then (so a crashed replica's round is retried elsewhere, resuming from that
// state), and completes after a while with its state, so the workflow's history stays small.
import { activityInfo, asyncLocalStorage, CompleteAsyncError } from '@temporalio/activity';
import { ActivityCancelledError, ActivityNotFoundError, ActivityPausedError, ActivityResetError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import { annotationWarnings } from '../crd/annotations.ts';
import { ANNOTATIONS, type Phase, type QueenCluster, type QueenClusterStatus } from '../crd/schema.ts';
import { assess, type Assessment } from '../plan/assess.ts';
import { decide, rolledOutGeneration } from '../plan/decide.ts';
import { readAnnotations } from '../crd/annotations.ts';
import { podsToServe } from '../plan/serving.ts';
import { linkStatusOf, standbyLinkUnread, standbyProbeStatus, standbysOf } from '../plan/link.ts';
import { answeringNodes, stallMemoryFromStatus, trackStalls, type StallMemory } from '../plan/stalls.ts';
import { setVoters } from './broker.ts';
import type { OwnedObjects } from './cluster-cache.ts';
import { clusterKey as clusterKeyOf, observeCluster, opLogger, probeThrough, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { serveAgain } from './drain.ts';
import { changeThroughLeader } from './membership.ts';
import { getCluster, isConflict, patchClusterStatus } from './kube.ts';
import { leaderChanges, observerRounds } from '../metrics.ts';
import { clusterConditions, comparableStatus, doorStatus, observedStatus, READY_MESSAGE, STANDBY_READY_MESSAGE } from './status.ts';
import { withDefaults } from '../crd/defaults.ts';
import { clusterView } from './view.ts';
import { planStatus } from './plan.ts';

export interface ObserverState {
  memory: StallMemory | null;
  lastProbe: { at: number; ok: boolean; error?: string } | null;
  lastPhase: Phase | null;
  /** The leader's term last seen (a change counts into queen_cluster_leader_changes_total). */
  lastTerm?: number | null;
  /** The annotation warnings already given (annotation=value): each is said once while it stands. */
  warned?: string[];
  /**
   * A joint configuration seen, and since when (ms): finished once it outlived a change. `held`:
   * why it could not be finished yet (the leader refused, or a pause), said in status and once in an Event.
   */
  joint?: { sets: number[][]; since: number; held?: string } | null;
}

/** A voter change commits its two steps within a second or two; a joint older than this was left behind. */
export const JOINT_LEFT_AFTER_MS = 10_000;

/** How often a round heartbeats its state (the workflow's heartbeat timeout is 60 s). */
export const ROUND_BEAT_MS = 30_000;

export interface ObserverRun {
  gone: boolean;
  state: ObserverState;
}

/** One round: an activity attempt that completes asynchronously, with what it looked at last. */
interface Round {
  token: Uint8Array;
  ref: ClusterRef;
  state: ObserverState;
  /** Ended from outside (cancelled, timed out, taken over by a newer attempt): it says nothing more. */
  over: boolean;
  done: Promise<void>;
  /** Ends the pause between two looks (something of the cluster changed). */
  wake: () => void;
}

/** Looks at one cluster are at least this far apart, however often it changes. */
const LOOK_GAP_MS = 1000;

/**
 * The observer rounds this process runs. None holds an activity slot: each is a loop of looks with
 * a timer of its own, which completes its activity through the Temporal client.
 */
export class ObserverRounds {
  private readonly rounds = new Map<string, Round>();
  private readonly deps: ActivityDeps;
  /** Told when a round finds its activity gone (its run ended from outside, or it moved). */
  onLost: (namespace: string, name: string) => void = () => undefined;

  constructor(deps: ActivityDeps) {
    this.deps = deps;
    // A change of the cluster's spec, annotations or objects is looked at at once, not at the next
    // look: a pod that stops, an annotation that asks for a plan. Its status writes (ours) are not.
    deps.cache?.onChange((namespace, name, what) => {
      if (what === 'status') return;
      for (const r of this.rounds.values()) if (r.ref.namespace === namespace && r.ref.name === name) r.wake();
    });
  }

  /** How many clusters this process observes now (queen_observer_rounds). */
  get size(): number {
    return this.rounds.size;
  }

  /** The clusters this process observes now (queen_cluster_observed). */
  observed(): ClusterRef[] {
    return [...this.rounds.values()].filter((r) => !r.over).map((r) => r.ref);
  }

  /** Takes the round of the activity that runs now; its slot is freed when the activity returns. */
  take(ref: ClusterRef, state: ObserverState): never {
    const { deps } = this;
    if (!deps.completions) throw new Error('the observer needs the Temporal client of the worker to complete its rounds');
    // A stopping replica takes no round: Temporal tries it again, on a replica that stays.
    if (deps.stopping?.aborted) throw ApplicationFailure.retryable('this operator replica is stopping: another one observes the cluster', 'ReplicaStopping');
    const info = activityInfo();
    const key = info.workflowExecution?.workflowId ?? clusterKeyOf(ref);
    // An older attempt of the same observer here ended when this one began (its token is dead).
    const older = this.rounds.get(key);
    if (older) older.over = true;
    const round: Round = { token: info.taskToken, ref, state, over: false, done: Promise.resolve(), wake: () => undefined };
    this.rounds.set(key, round);
    observerRounds.set(this.rounds.size);
    // The round outlives its activity: it runs outside the activity's context (nothing in it may
    // heartbeat or read the activity's info as if it still ran).
    round.done = asyncLocalStorage.exit(() => this.run(round)).finally(() => {
      if (this.rounds.get(key) === round) this.rounds.delete(key);
      observerRounds.set(this.rounds.size);
    });
    throw new CompleteAsyncError();
  }

  /** Waits until every round has handed its state back (on SIGTERM, before the connection closes). */
  async handOver(): Promise<void> {
    await Promise.all([...this.rounds.values()].map((r) => r.done));
  }

  private async run(round: Round): Promise<void> {
    const { deps } = this;
    const log = deps.log.child({ namespace: round.ref.namespace, name: round.ref.name });
    const until = Date.now() + deps.settings.observeRunMs;
    let lastWritten = '';
    // The looks (every observe interval, or soon after the cluster changed) and the heartbeats
    // (every ROUND_BEAT_MS, whatever the interval) each have their time.
    let nextLook = Date.now();
    let lastLook = 0;
    let nextBeat = Date.now() + ROUND_BEAT_MS;
    try {
      // A stopping replica hands its state back: the workflow's next round runs on another one.
      while (!round.over && Date.now() < until && !deps.stopping?.aborted) {
        if (Date.now() >= nextLook) {
          lastLook = Date.now();
          const look = await this.current(round.ref);
          if (look === 'gone') return await this.complete(round, { gone: true, state: round.state });
          if (look && !look.qc.metadata.deletionTimestamp) {
            try {
              const r = await observeOnce(deps, look.qc, round.state, lastWritten, look.owned);
              round.state = r.state;
              lastWritten = r.written;
            } catch (err) {
              log.warn({ err: String(err) }, 'observation failed; trying again');
            }
          }
          nextLook = lastLook + deps.settings.observeIntervalMs;
        }
        if (Date.now() >= nextBeat) {
          nextBeat = Date.now() + ROUND_BEAT_MS;
          await this.beat(round, log);
        }
        if (round.over) break;
        const woken = await this.wait(Math.max(0, Math.min(nextLook, nextBeat, until) - Date.now()), round);
        // A change is looked at soon, but looks stay LOOK_GAP_MS apart however often it changes.
        if (woken) nextLook = Math.min(nextLook, Math.max(Date.now(), lastLook + LOOK_GAP_MS));
      }
      if (!round.over) await this.complete(round, { gone: false, state: round.state });
    } catch (err) {
      // Said, and left to the heartbeat timeout: Temporal then tries the round again.
      log.warn({ err: String(err) }, 'the observer round failed');
    }
  }

  /**
   * Waits `ms`, or until something of the round's cluster changes (true), or the process stops.
   * (Plain timers: a round runs after its activity returned.)
   */
  private wait(ms: number, round: Round): Promise<boolean> {
    const stopping = this.deps.stopping;
    if (stopping?.aborted) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const done = (woken: boolean) => {
        clearTimeout(timer);
        stopping?.removeEventListener('abort', stopped);
        round.wake = () => undefined;
        resolve(woken);
      };
      const stopped = () => done(false);
      const timer = setTimeout(() => done(false), ms);
      stopping?.addEventListener('abort', stopped, { once: true });
      round.wake = () => done(true);
    });
  }

  /**
   * The cluster as it is now, from the process's watches when they can be trusted (else from the
   * API server); 'gone' once the QueenCluster is deleted or re-created (which the API server
   * confirms), null when it cannot be read this time.
   */
  private async current(ref: ClusterRef): Promise<{ qc: QueenCluster; owned?: OwnedObjects } | 'gone' | null> {
    const snap = this.deps.cache?.snapshot(ref.namespace, ref.name) ?? null;
    if (snap?.cluster && snap.cluster.metadata.uid === ref.uid) return { qc: snap.cluster, owned: snap.owned };
    try {
      const qc = await getCluster(this.deps.kube, ref.namespace, ref.name);
      return !qc || qc.metadata.uid !== ref.uid ? 'gone' : { qc };
    } catch (err) {
      this.deps.log.warn({ namespace: ref.namespace, name: ref.name, err: String(err) }, 'could not read the QueenCluster; trying again');
      return null;
    }
  }

  private async beat(round: Round, log: Logger): Promise<void> {
    try {
      await this.deps.completions!.heartbeat(round.token, round.state);
    } catch (err) {
      if (err instanceof ActivityCancelledError) {
        round.over = true;
        await this.deps.completions!.reportCancellation(round.token).catch(() => undefined);
      } else if (err instanceof ActivityNotFoundError || err instanceof ActivityPausedError || err instanceof ActivityResetError) {
        // The attempt is over (the run ended, or its heartbeat timed out and it was tried again).
        round.over = true;
        this.onLost(round.ref.namespace, round.ref.name);
      } else {
        log.warn({ err: String(err) }, 'the observer could not heartbeat; trying again at the next look');
      }
    }
  }

  private async complete(round: Round, run: ObserverRun): Promise<void> {
    if (round.over) return;
    round.over = true;
    try {
      await this.deps.completions!.complete(round.token, run);
    } catch (err) {
      if (!(err instanceof ActivityNotFoundError)) throw err;
    }
  }
}

export function observerActivities(deps: ActivityDeps, rounds: ObserverRounds) {
  return {
    /**
     * One round of the observer: observes the cluster for `observeRunMs` outside any activity slot,
     * then completes with its state so the workflow can run it again (or continue as new).
     * Completes with `gone` once the QueenCluster is deleted or re-created.
     */
    async observeClusterStatus(ref: ClusterRef, initial: ObserverState | null): Promise<ObserverRun> {
      const resumed = activityInfo().heartbeatDetails as ObserverState | undefined;
      return rounds.take(ref, resumed ?? initial ?? { memory: null, lastProbe: null, lastPhase: null });
    },
  };
}

async function observeOnce(deps: ActivityDeps, qc: QueenCluster, state: ObserverState, lastWritten: string, owned?: OwnedObjects): Promise<{ state: ObserverState; written: string }> {
  const ref = { namespace: qc.metadata.namespace, name: qc.metadata.name };
  const obs = await observeCluster(deps, qc, owned);
  const term = obs.membership?.term ?? null;
  if (term !== null && typeof state.lastTerm === 'number' && term !== state.lastTerm) leaderChanges.inc({ namespace: ref.namespace, name: ref.name });
  const lastTerm = term ?? state.lastTerm ?? null;
  const memory = trackStalls(state.memory ?? stallMemoryFromStatus(qc.status?.members, obs.at), obs.membership, obs.at, answeringNodes(obs));
  // The last probe is the newest of this observer's and any other's (an operation's gate probes
  // write status too): a formation that ended with a committed write is not "no pod answers".
  let lastProbe = state.lastProbe;
  const statusProbeAt = qc.status?.lastProbeTime ? Date.parse(qc.status.lastProbeTime) : NaN;
  if (Number.isFinite(statusProbeAt) && statusProbeAt > (lastProbe?.at ?? 0) && typeof qc.status?.commits === 'boolean') {
    lastProbe = { at: statusProbeAt, ok: qc.status.commits, ...(qc.status.lastProbeError ? { error: qc.status.lastProbeError } : {}) };
  }
  const joint = await finishJointLeftBehind(deps, qc, obs, state.joint ?? null);
  const status: Partial<QueenClusterStatus> = observedStatus(obs, memory);
  const link = linkStatusOf(obs, qc.spec, qc.status);
  if (link) Object.assign(status, link);
  // A source's standbys here, with their versions: its upgrade waits for theirs (plan/link.ts).
  const standbys = qc.spec.link && deps.cache ? standbysOf(qc, deps.cache.clusters()) : [];
  if (standbys.length > 0 || (qc.status?.standbys?.length ?? 0) > 0) status.standbys = standbys;
  // The one-way door: the catalogue version, what each version's build reads, finalized or not.
  Object.assign(status, doorStatus(qc.status, obs, status.version ?? '', new Date()));
  // While writes do not commit, look again sooner, so COMMITS turns true soon after they do.
  const interval = lastProbe && !lastProbe.ok ? Math.min(deps.settings.probeIntervalMs, 5000) : deps.settings.probeIntervalMs;
  // A standby whose link is not read yet (a moment after it formed): no write is sent, the last
  // probe stands until the link says how it follows. A standby's probe is the look itself (no
  // write is sent): it is taken again as soon as the look says otherwise than the last one, so
  // COMMITS changes in the same status write as the standby's state.
  const standbyNow = standbyProbeStatus(obs, qc.spec, ref.namespace, new Date(obs.at));
  const due = !lastProbe || obs.at - lastProbe.at >= interval || (standbyNow !== null && standbyNow.commits !== lastProbe.ok);
  if (due && !standbyLinkUnread(obs, qc.spec, qc.status)) {
    const probe = await probeThrough(deps, qc, obs, null);
    lastProbe = { at: Date.now(), ok: probe.ok, ...(probe.ok ? {} : { error: probe.error }) };
    status.commits = probe.ok;
    status.lastProbeTime = new Date(lastProbe.at).toISOString();
    status.lastProbeError = probe.ok ? null : probe.error;
  }

  const warned = await warnAnnotations(deps, qc, obs, state.warned ?? []);
  // The plan, while queenmq.com/plan or plan-only asks for it (removed once neither does).
  const plan = planStatus(qc, obs, new Date());
  if (plan !== undefined) status.plan = plan;

  const running = qc.status?.operation ?? null;
  let assessment: Assessment | null = null;
  // An operation is due and starts at once (the watcher starts it on the same change): its phase
  // comes next, and this look says nothing of a cluster that is on its way (a FormCluster that
  // formed on one voter, the ScaleVoters that adds the others).
  const view = running ? null : clusterView(qc, obs);
  const decision = view ? decide(view, null, obs.at) : null;
  if (view && decision && decision.action !== 'start') {
    // No operation drains a pod now: every pod whose node is a member takes client connections
    // (asked of the API server first: an operation that began since this look may be draining it).
    if (podsToServe(obs).length > 0 && !qc.status?.fence) {
      await getCluster(deps.kube, ref.namespace, ref.name)
        .then((now) => (now && !now.status?.operation ? serveAgain(deps, { ...ref, uid: qc.metadata.uid }, obs) : undefined))
        .catch((err: unknown) => opLogger(deps, { ...ref, uid: qc.metadata.uid ?? '' }).warn({ err: String(err) }, 'could not set the serving label of a pod'));
    }
    // The spec is rolled out (nothing behind, no operation needed): observedGeneration catches up.
    const rolledOut = rolledOutGeneration(view);
    if (rolledOut !== undefined) status.observedGeneration = rolledOut;
    const blockedBy = decision.action === 'stopped' || decision.action === 'refused' ? decision.message : null;
    assessment = assess({
      obs,
      memory,
      formed: (qc.status?.voters?.length ?? 0) > 0,
      probe: lastProbe,
      stallAfterMs: deps.settings.stallAfterMs,
      secretName: qc.spec.secretName,
      stoppedOperation: blockedBy,
      standby: qc.spec.standby,
      fence: qc.status?.fence,
    });
    if (decision.action === 'paused' && assessment.phase === 'Ready') {
      assessment = { phase: 'Ready', message: decision.message };
    }
    // spec.upgrade.finalize Manual: at rest, the line says the way back is open (or that it closed).
    if (assessment.phase === 'Ready' && !assessment.message && withDefaults(qc.spec).upgrade.finalize === 'Manual' && status.finalization) {
      assessment = { phase: 'Ready', message: status.finalization };
    }
    // A voter change left half done that could not be finished: no membership change can run.
    if (joint?.held && assessment.phase === 'Ready') assessment = { phase: 'Degraded', message: joint.held };
    status.phase = assessment.phase;
    status.message = assessment.message;
  }
  const phase = (status.phase ?? qc.status?.phase ?? 'Forming') as Phase;
  const message = status.message ?? qc.status?.message ?? '';
  status.conditions = clusterConditions(qc.status?.conditions, {
    phase,
    message,
    operation: running ? { type: running.type, step: running.step ?? null } : null,
    paused: readAnnotations(qc.metadata.annotations).pause,
    generation: qc.metadata.generation,
    now: new Date(),
  });

  const comparable = comparableStatus(status, {
    nearEntries: Math.max(deps.settings.caughtUpEntries, obs.membership?.promoteMaxLag ?? 0),
    stallAfterMs: deps.settings.stallAfterMs,
    now: obs.at,
  });
  if (comparable !== lastWritten || status.lastProbeTime) {
    try {
      // The resourceVersion makes this a compare-and-set: an operation that began since the read
      // keeps its phase and message, and one that ended keeps the conditions it wrote (Progressing
      // False), which a write from before its end would otherwise turn back to True.
      await patchClusterStatus(deps.kube, ref.namespace, ref.name, status, qc.metadata.resourceVersion);
    } catch (err) {
      if (!isConflict(err)) throw err;
      // While an operation writes its steps the object changes often: the observed fields are
      // written again at once from a fresh read (the operation's phase and message are its own).
      const fresh = running ? await getCluster(deps.kube, ref.namespace, ref.name) : null;
      if (!fresh?.status?.operation || fresh.status.operation.type !== running?.type) {
        return { state: { memory, lastProbe, lastPhase: state.lastPhase, lastTerm, warned, joint }, written: '' };
      }
      const again = { ...status, conditions: clusterConditions(fresh.status.conditions, {
        phase: (fresh.status.phase ?? phase) as Phase,
        message: fresh.status.message ?? message,
        operation: { type: fresh.status.operation.type, step: fresh.status.operation.step ?? null },
        paused: readAnnotations(fresh.metadata.annotations).pause,
        generation: fresh.metadata.generation,
        now: new Date(),
      }) };
      try {
        await patchClusterStatus(deps.kube, ref.namespace, ref.name, again, fresh.metadata.resourceVersion);
      } catch (second) {
        if (!isConflict(second)) throw second;
        return { state: { memory, lastProbe, lastPhase: state.lastPhase, lastTerm, warned, joint }, written: '' };
      }
    }
    lastWritten = comparable;
  }
  // A change of phase is an Event: against the phase this round saw last, or, on a first round
  // (an operation just ended, or the operator restarted), the phase in status as this round read it.
  const before = state.lastPhase ?? (qc.status?.phase as Phase | undefined) ?? null;
  if (assessment && before !== null && assessment.phase !== before) {
    if (assessment.phase === 'Degraded' || assessment.phase === 'Blocked') await stepEvent(deps, qc, assessment.phase, assessment.message, 'Warning');
    else if (assessment.phase === 'Ready') await stepEvent(deps, qc, 'Ready', READY_MESSAGE);
    else if (assessment.phase === 'Standby') await stepEvent(deps, qc, 'Standby', STANDBY_READY_MESSAGE);
  }
  return { state: { memory, lastProbe, lastPhase: assessment?.phase ?? state.lastPhase, lastTerm, warned, joint }, written: lastWritten };
}

/**
 * A Warning Event for each annotation whose value is not one it takes (it acts as unset), and for
 * a replacement that cannot be done: once while it stands, whoever reads the annotation, so a
 * running operation is not interrupted to say it. Returns what has been said.
 */
async function warnAnnotations(deps: ActivityDeps, qc: QueenCluster, obs: { statefulSet: { replicas: number } | null }, warned: string[]): Promise<string[]> {
  const now = annotationWarnings(qc, obs.statefulSet?.replicas ?? null);
  for (const w of now) {
    if (warned.includes(w.key)) continue;
    opLogger(deps, { namespace: qc.metadata.namespace, name: qc.metadata.name, uid: qc.metadata.uid ?? '' }).warn({ reason: w.reason }, w.message);
    await stepEvent(deps, qc, w.reason, w.message, 'Warning');
  }
  return now.map((w) => w.key);
}

/**
 * A joint configuration that outlived any change in progress was left behind by a leader that
 * stopped between the two steps (every other change is refused while it lasts). The broker's
 * contract says how to finish it: PUT voters with the joint's last set. Said in an Event.
 */
async function finishJointLeftBehind(
  deps: ActivityDeps,
  qc: QueenCluster,
  obs: Awaited<ReturnType<typeof observeCluster>>,
  seen: ObserverState['joint'],
): Promise<ObserverState['joint']> {
  const sets = obs.membership?.joint;
  if (!sets || sets.length < 2) return null;
  const same = seen && JSON.stringify(seen.sets) === JSON.stringify(sets);
  const since = same ? seen.since : obs.at;
  if (obs.at - since < JOINT_LEFT_AFTER_MS) return { sets, since };
  const voters = sets[sets.length - 1]!;
  const what = `finishing a voter change left half done: voters [${voters.join(',')}]`;
  const log = opLogger(deps, { namespace: qc.metadata.namespace, name: qc.metadata.name, uid: qc.metadata.uid ?? '' });
  const left = `the joint configuration [[${sets[0]!.join(',')}],[${voters.join(',')}]] was left by a leader that stopped between the two steps`;
  // Not finished: status says why (every other membership change waits meanwhile), an Event once.
  const held = async (why: string): Promise<ObserverState['joint']> => {
    if (seen?.held !== why) {
      log.warn({ joint: sets }, why);
      await stepEvent(deps, qc, 'FinishVoterChange', `${why} (${left}); membership changes wait until it is finished`, 'Warning');
    }
    return { sets, since, held: why };
  };
  // A person who paused the cluster decides when its membership changes.
  if (readAnnotations(qc.metadata.annotations).pause) return held(`${what}: paused by the ${ANNOTATIONS.pause} annotation`);
  const r = await changeThroughLeader(deps, qc, obs, qc.status?.phase ?? 'Degraded', what, voters[0] ?? 0, (base, token) => setVoters(base, voters, token));
  if ('hold' in r) return held(r.hold.message);
  log.info({ joint: sets }, `${what} (${left})`);
  await stepEvent(
    deps,
    qc,
    'FinishVoterChange',
    `${what}: ${left}`,
    'Warning',
  );
  return null;
}
