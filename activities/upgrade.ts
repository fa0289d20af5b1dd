// The steps of RollingUpgrade: apply the new template (the StatefulSet is OnDelete, so that
// restarts nothing), then one pod at a time: wait for the stop gate, restart the pod. Before the
// first pod moves, the template every pod ran is recorded in status.upgrade.previous; a new version
// that fails (a pod on it crash-loops, is not Ready and live within progressDeadlineSeconds, or
// fails its canary) holds the upgrade or, with spec.upgrade.onFailure Rollback, takes the pods it
// moved back to that template, through the same stop gate, the leader last.
import type { V1PodTemplateSpec, V1StatefulSet } from '@kubernetes/client-node';
import { ApplicationFailure } from '@temporalio/common';
import { withDefaults } from '../crd/defaults.ts';
import { readAnnotations } from '../crd/annotations.ts';
import { ANNOTATIONS, type QueenCluster, type StoredSpec, type UpgradeStatus } from '../crd/schema.ts';
import { rollbackRefusedText, runningVersion, versionDoor, versionRefusedText, type ClosedDoor } from '../plan/door.ts';
import { goDuration, listText, podsText } from '../plan/format.ts';
import { stopGate } from '../plan/gates.ts';
import { podAt, type Observation, type PodObservation } from '../plan/observation.ts';
import { canaryProblem, canaryUp, newVersionFailure, readyAndLive, timeLeftText, type CanaryStart, type ProgressWatch } from '../plan/progress.ts';
import { nextRestart, outdatedPods, type RestartPick } from '../plan/restarts.ts';
import { canaryLine, canarySecondsAfter, DOOR_GATE, finalizeLine, needsApproval, templateLine } from '../plan/steps.ts';
import { probeWrite } from './broker.ts';
import { brokerToken, loadCluster, observeCluster, probeThrough, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { ASK_THE_API_SERVER, holdUntil, type Hold } from './waits.ts';
import { drainAheadOrHold, gateOptions, recordProbe, stallMemory, stopHold } from './gate.ts';
import { applyObject, getStatefulSet, listPods, patchClusterStatus, rawRequest } from './kube.ts';
import { brokerBase, podObservation } from './observe.ts';
import { applyObjectsBesideStatefulSet } from './apply.ts';
import { CONTAINER, imageRef, imageTag, keptShape, names, peersFor, podTemplate, SERVING_LABEL, specHash, statefulSet, templateHoldsClusterVersion } from './resources.ts';
import { podVersion } from './status.ts';

/** Where a rollback goes: the template recorded before the first pod moved. */
export interface RollbackTarget {
  templateHash: string;
  version: string;
  /** The version that failed, and why. */
  failedVersion: string;
  reason: string;
}

/** The next step of a rollback; `superseded`: it cannot be made and the spec changed since. */
export type RollbackStep = { kind: 'done' } | { kind: 'restart'; pick: RestartPick } | { kind: 'superseded'; message: string };

export interface AppliedTemplate {
  specHash: string;
  templateHash: string;
  version: string;
  /** A rollback of this same request was under way (an earlier run stopped in it): it goes on. */
  rollingBack?: RollbackTarget;
  /**
   * This version failed and holds for a person (status.upgrade.held, recorded by an earlier run
   * that was then yielded or cancelled): the verdict stands until onFailure, the version or the
   * retry annotation changes.
   */
  held?: UpgradeFailure;
}

/** Why the new version failed, in words, and the version (and its image, where the step knew it). */
export interface UpgradeFailure {
  reason: string;
  failedVersion: string;
  failedImage?: string;
}

/** What a person decided about a held failure: roll it back, go to another version, or try it again. */
export type FailureDecision = 'rollback' | 'retarget' | 'again';

export type NextRestart =
  | { kind: 'done' }
  | { kind: 'retarget'; specHash: string }
  /** `canarySeconds`: the pick is the first pod to move to the new version, and it soaks this long. */
  | { kind: 'restart'; pick: RestartPick; specHash: string; canarySeconds?: number }
  /**
   * The new version fails: spec.upgrade.onFailure is Rollback, or (`hold`) it is Hold and the
   * workflow waits for a person's decision (a run that parks its waits).
   */
  | { kind: 'failed'; failure: UpgradeFailure; hold?: boolean };

export type CanaryVerdict = { kind: 'passed' } | { kind: 'retarget' } | { kind: 'failed'; failure: UpgradeFailure; hold?: boolean };

export interface CanaryInput {
  ordinal: number;
  /** The uid of the pod that was restarted: the canary is its successor. */
  oldUid: string;
  /** When the successor came (ms), for the progress deadline. */
  since: number;
  specHash: string;
  version: string;
  seconds: number;
}

/** Which pods run which version, e.g. "pod 2 runs 2.6.1, pods 0 and 1 run 2.6.0". */
export function versionsText(obs: Observation): string {
  const byVersion = new Map<string, number[]>();
  for (const p of obs.pods) {
    const v = podVersion(obs, p.ordinal) ?? 'an unknown version';
    byVersion.set(v, [...(byVersion.get(v) ?? []), p.ordinal]);
  }
  const parts = [...byVersion.entries()].map(([v, ords]) => `${podsText(ords.sort((a, b) => a - b))} ${ords.length === 1 ? 'runs' : 'run'} ${v}`);
  return listText(parts);
}

/**
 * With spec.upgrade.approval Manual, the leader waits for a person: the queenmq.com/approve
 * annotation must name the version the upgrade goes to (another version, or none, holds it).
 */
export function approvalHold(qc: QueenCluster, pick: RestartPick): Hold | null {
  const spec = withDefaults(qc.spec);
  if (!needsApproval(spec, pick)) return null;
  if (readAnnotations(qc.metadata.annotations).approve === spec.version) return null;
  const { namespace, name } = qc.metadata;
  return {
    phase: 'Upgrading',
    gate: 'approved',
    message: `waiting for approval to restart the leader (pod ${pick.ordinal}): kubectl -n ${namespace} annotate queencluster ${name} ${ANNOTATIONS.approve}=${spec.version}`,
  };
}

/**
 * With spec.upgrade.onFailure Hold, a failed new version waits for a person, who is told what they
 * can do: roll it back, or, when the cluster's catalogue version was raised past what the previous
 * version's build reads (`door`), only go forward; and (`retry`: the cluster) try it again.
 */
export function failureHold(version: string, reason: string, opts: { retry?: { namespace: string; name: string }; door?: ClosedDoor | null } = {}): Hold {
  const again = opts.retry ? `, or try it again: kubectl -n ${opts.retry.namespace} annotate queencluster ${opts.retry.name} ${ANNOTATIONS.retry}=$(date +%s) --overwrite` : '';
  if (opts.door) return { phase: 'Blocked', gate: 'new-version-healthy', message: `${rollbackRefusedText(opts.door, version, reason, 'holds')}${again}` };
  return {
    phase: 'Blocked',
    gate: 'new-version-healthy',
    message: `the upgrade to ${version} holds: ${reason}; set spec.upgrade.onFailure to Rollback to roll it back, or change spec.version${again}`,
  };
}

/** The door of the version the pods ran before the upgrade (where a rollback goes), if it is closed. */
const previousDoor = (qc: QueenCluster, obs: Observation) => {
  const prev = qc.status?.upgrade?.previous?.version;
  return prev ? versionDoor(qc.status, obs, prev) : null;
};

/**
 * Tracks whether the pod restarted last has come up on the new version, and judges the new
 * version: a failure rolls back (onFailure Rollback), or holds for a person. In a run that parks
 * its waits (`parks`) the hold is the workflow's: the failure ends the wait (`held`), and the
 * verdict stands there whatever the pods do next.
 */
function progressJudge(watch: ProgressWatch | null | undefined, parks = false) {
  let progressed = false;
  const judge = (qc: QueenCluster, obs: Observation): { failed: UpgradeFailure; held?: boolean } | { hold: Hold } | null => {
    const spec = withDefaults(qc.spec);
    if (watch && !progressed && podAt(obs, watch.ordinal)?.hash === obs.wantedHash && readyAndLive(obs, watch.ordinal)) progressed = true;
    const reason = newVersionFailure({
      obs,
      version: spec.version,
      watch: watch && !progressed ? watch : null,
      deadlineMs: spec.upgrade.progressDeadlineSeconds * 1000,
    });
    if (!reason) return null;
    if (spec.upgrade.onFailure === 'Rollback') return { failed: { reason, failedVersion: spec.version } };
    if (parks) return { failed: { reason, failedVersion: spec.version, failedImage: imageRef(spec) }, held: true };
    return { hold: failureHold(spec.version, reason, { door: previousDoor(qc, obs) }) };
  };
  /**
   * A hold while the pod restarted last has not come up yet, looked at again by its deadline at
   * the latest: a wait that parks (for an approval, a pause) still judges the new version on time.
   */
  judge.byDeadline = (qc: QueenCluster, hold: Hold): Hold => {
    if (!watch || progressed) return hold;
    const at = watch.since + withDefaults(qc.spec).upgrade.progressDeadlineSeconds * 1000 + 1000;
    // Past it, with no verdict (the pod's node is down, say): nothing falls due any more.
    if (at <= Date.now()) return hold;
    return { ...hold, lookAgainAt: Math.min(hold.lookAgainAt ?? Infinity, at) };
  };
  return judge;
}

/** The failed version a person is asked about, recorded in status.upgrade.held. */
type HeldStatus = NonNullable<UpgradeStatus['held']>;

/** A held verdict still stands: the spec asks for the image that failed, and nobody asked to try it again. */
function heldStands(qc: QueenCluster, held: HeldStatus): boolean {
  return held.image === imageRef(withDefaults(qc.spec)) && (held.retryToken ?? '') === readAnnotations(qc.metadata.annotations).retry;
}

const fingerprintOf = (qc: QueenCluster) => `spec:${specHash(qc)}`;

/** The StatefulSet as the API server serves it (plain JSON, as it is stored). */
async function rawStatefulSet(deps: ActivityDeps, ref: ClusterRef): Promise<V1StatefulSet | null> {
  try {
    return (await rawRequest(deps.kube.kc, 'GET', `/apis/apps/v1/namespaces/${ref.namespace}/statefulsets/${names.statefulSet(ref.name)}`)) as V1StatefulSet;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return null;
    throw err;
  }
}

async function patchUpgradeStatus(deps: ActivityDeps, ref: ClusterRef, upgrade: Record<string, unknown>) {
  await patchClusterStatus(deps.kube, ref.namespace, ref.name, { upgrade });
}

/**
 * Before the first pod moves: the template every pod runs, as the StatefulSet has it, goes to
 * status.upgrade.previous (where a rollback goes). While the pods run two templates (an earlier
 * run stopped half-way), the record of the first one stays; one that no pod runs any more is of
 * no use and goes.
 */
async function recordPrevious(deps: ActivityDeps, ref: ClusterRef, qc: QueenCluster, live: V1StatefulSet, newHash: string) {
  const liveHash = live.spec?.template.metadata?.annotations?.[ANNOTATIONS.configHash];
  if (!liveHash || liveHash === newHash) return;
  const pods = (await listPods(deps.kube, ref.namespace, ref.name))
    .map((p) => podObservation(ref.name, p))
    .filter((p): p is PodObservation => p !== null && !p.terminating);
  const prev = qc.status?.upgrade?.previous ?? null;
  if (pods.length > 0 && pods.every((p) => p.hash === liveHash)) {
    if (prev?.templateHash === liveHash && prev.template) return;
    const image = live.spec?.template.spec?.containers.find((c) => c.name === CONTAINER)?.image ?? '';
    const previous: NonNullable<UpgradeStatus['previous']> = {
      version: imageTag(image) ?? image,
      image,
      templateHash: liveHash,
      specHash: live.metadata?.annotations?.[ANNOTATIONS.specHash] ?? '',
      recordedAt: new Date().toISOString(),
      template: live.spec!.template as Record<string, unknown>,
    };
    // A merge patch would keep the keys of an older template that this one lacks: out first.
    if (prev) await patchUpgradeStatus(deps, ref, { previous: null });
    await patchUpgradeStatus(deps, ref, { previous });
    return;
  }
  if (prev && !pods.some((p) => p.hash === prev.templateHash)) await patchUpgradeStatus(deps, ref, { previous: null });
}

/** The recorded template, with the peer list of the pod count the StatefulSet has now. */
function previousTemplate(qc: QueenCluster, spec: StoredSpec, recorded: Record<string, unknown>, pods: number): V1PodTemplateSpec {
  const template = structuredClone(recorded) as V1PodTemplateSpec;
  // A template recorded before the serving label: its pods must still reach the client Services.
  template.metadata = { ...template.metadata, labels: { ...template.metadata?.labels, [SERVING_LABEL]: 'true' } };
  for (const c of template.spec?.containers ?? []) {
    for (const e of c.env ?? []) if (e.name === 'QUEEN_RAFT_PEERS') e.value = peersFor(qc, spec, pods);
  }
  return template;
}

/** The recorded template goes back on the StatefulSet (OnDelete: no pod restarts), with a Warning Event when it changes. */
async function applyRollbackTemplate(deps: ActivityDeps, qc: QueenCluster, live: V1StatefulSet, prev: NonNullable<UpgradeStatus['previous']>, target: RollbackTarget) {
  const spec = withDefaults(qc.spec);
  const shape = keptShape(live, spec);
  const sts = statefulSet(qc, shape);
  sts.spec!.template = previousTemplate(qc, spec, prev.template!, shape.pods);
  // Not the spec hash of either: the Services and the budget stay as the failed spec made them,
  // so a spec put back as it was is applied again (its template restarts no pod).
  sts.metadata!.annotations = { ...sts.metadata!.annotations, [ANNOTATIONS.specHash]: `rolled-back:${prev.specHash ?? ''}` };
  const before = live.spec?.template.metadata?.annotations?.[ANNOTATIONS.configHash];
  await applyObject(deps.kube, sts);
  if (before !== target.templateHash) {
    await stepEvent(deps, qc, 'RollBack', `rolling back to ${target.version}: ${target.reason}`, 'Warning');
  }
}

export function upgradeActivities(deps: ActivityDeps) {
  return {
    /**
     * Applies the pod template of the spec as it is now to the StatefulSet (its pod count and claim
     * template stay as they are), and the Services and the budget. OnDelete: no pod restarts.
     * First the template every pod runs is recorded (status.upgrade.previous). When a rollback of
     * this same request is under way (an earlier run stopped in it), nothing is applied: the
     * rollback goes on.
     */
    async applyPodTemplate(ref: ClusterRef): Promise<AppliedTemplate> {
      const [qc, live] = await Promise.all([loadCluster(deps, ref), rawStatefulSet(deps, ref)]);
      const spec = withDefaults(qc.spec);
      if (!live || live.metadata?.deletionTimestamp) {
        throw ApplicationFailure.nonRetryable(`the StatefulSet ${ref.name} is missing: the cluster has to be formed again`, 'NoStatefulSet');
      }
      const shape = keptShape(live, spec);
      const { hash } = podTemplate(qc, shape.pods);
      const applied = { specHash: specHash(qc), templateHash: hash, version: spec.version };
      const rollback = qc.status?.upgrade?.rollback;
      if (rollback?.templateHash && rollback.fingerprint === fingerprintOf(qc)) {
        return {
          ...applied,
          rollingBack: { templateHash: rollback.templateHash, version: rollback.version ?? '', failedVersion: rollback.failedVersion ?? spec.version, reason: rollback.reason ?? '' },
        };
      }
      // A rollback of another request is over: this one supersedes it.
      if (rollback) await patchUpgradeStatus(deps, ref, { rollback: null });
      // A failure of this very version that waits for a person: the verdict stands (an earlier run
      // recorded it and was then yielded or cancelled), until the version or the retry annotation changes.
      const held = qc.status?.upgrade?.held;
      if (held && heldStands(qc, held)) {
        return { ...applied, held: { reason: held.reason ?? '', failedVersion: held.version ?? spec.version, failedImage: held.image } };
      }
      if (held) await patchUpgradeStatus(deps, ref, { held: null });
      // A version whose build cannot start on the cluster's catalogue version: nothing is applied
      // (a pod that restarts by itself meanwhile stays on what it runs); awaitNextRestart holds.
      if (live.spec?.template.metadata?.annotations?.[ANNOTATIONS.configHash] !== hash && versionDoor(qc.status, await observeCluster(deps, qc), spec.version)) {
        return applied;
      }
      const before = live.spec?.template.metadata?.annotations?.[ANNOTATIONS.configHash];
      // The template every pod runs is recorded before the StatefulSet takes the new one.
      await Promise.all([recordPrevious(deps, ref, qc, live, hash), applyObjectsBesideStatefulSet(deps, ref, qc)]);
      const sts = statefulSet(qc, shape);
      await applyObject(deps.kube, sts);
      if (before !== hash) {
        // A finalize (queenmq.com/finalize): the same image, without the setting that held the cluster version.
        const image = (t: V1PodTemplateSpec | undefined) => t?.spec?.containers.find((c) => c.name === CONTAINER)?.image;
        const finalizing =
          templateHoldsClusterVersion(live.spec?.template) && !templateHoldsClusterVersion(sts.spec?.template) && image(live.spec?.template) === image(sts.spec?.template);
        if (finalizing) {
          await stepEvent(deps, qc, 'Finalize', finalizeLine(spec.version));
        } else {
          await stepEvent(deps, qc, 'UpdateTemplate', templateLine(imageRef(spec)));
        }
      }
      return applied;
    },

    /**
     * Waits until the next pod may stop: the not-Ready one on an old template first, then the
     * highest ordinal that does not lead, the leader last; every other voter Ready for
     * minReadySeconds, live and caught up, no voter stalled, not paused, and a write committing
     * through a pod that stays. Returns `done` when no pod runs an old template, `retarget` when
     * the spec changed since the template was applied, and `failed` when the new version fails
     * (a pod on it crash-loops, or `watch`, the pod restarted last, is not Ready and live within
     * the progress deadline) and spec.upgrade.onFailure is Rollback; with Hold it holds.
     */
    async awaitNextRestart(ref: ClusterRef, applied: { specHash: string; watch?: ProgressWatch | null }): Promise<NextRestart> {
      const judge = progressJudge(applied.watch, ref.parks);
      return holdUntil<NextRestart>(deps, ref, async (look) => {
        const qc = await look.cluster();
        const spec = withDefaults(qc.spec);
        const wanted = specHash(qc);
        if (wanted !== applied.specHash) return { done: { kind: 'retarget', specHash: wanted } };
        const obs = await look.observe(qc);
        // Refused before any pod stops: the version's build cannot start on the cluster as it is.
        const door = versionDoor(qc.status, obs, spec.version);
        if (door) return { hold: { phase: 'Blocked', gate: DOOR_GATE, message: versionRefusedText(door, ref, runningVersion(qc.status)) } };
        const verdict = judge(qc, obs);
        if (verdict && 'failed' in verdict) return { done: { kind: 'failed', failure: verdict.failed, ...(verdict.held ? { hold: true } : {}) } };
        if (verdict) return verdict;
        const pick = nextRestart(obs);
        if (!pick) return { done: { kind: 'done' } };
        const approval = approvalHold(qc, pick);
        if (approval) return { hold: judge.byDeadline(qc, approval) };
        const hold = await stopHold(deps, qc, obs, pick.ordinal, { phase: 'Upgrading', next: `pod ${pick.ordinal} is next` }, { fromWatch: look.fromWatch });
        // The pick's drain runs in the last seconds of the other voters' minimum Ready time, so
        // its restart follows the gate at once; a pod drained ahead for a pick that changed, or
        // whose gate closed again, takes clients again.
        const held = await drainAheadOrHold(deps, ref, qc, obs, pick.ordinal, hold, { phase: 'Upgrading', next: `pod ${pick.ordinal} is next` }, look.fromWatch);
        if (held) return 'hold' in held ? { hold: judge.byDeadline(qc, held.hold) } : held;
        const seconds = canarySecondsAfter(obs, spec);
        const canary = seconds > 0 ? { canarySeconds: seconds } : {};
        return { done: { kind: 'restart', pick, specHash: wanted, ...canary } };
      });
    },

    /**
     * After the last restart: waits until every voter is Ready, live and caught up and a write
     * commits. `again` when the spec changed or a pod runs an old template meanwhile. With
     * `stopping` (a cancel), pods on an old template are expected: it only waits for the cluster
     * to be whole again before the operation ends (not for a pod that crash-loops on the new
     * version: it would not come back). With `wantedHash` (a rollback), the pods are
     * to run that template, whatever the spec says. A new version that fails meanwhile is judged
     * as in awaitNextRestart (`failure`).
     */
    async awaitSettled(
      ref: ClusterRef,
      applied: { specHash: string; stopping?: boolean; watch?: ProgressWatch | null; wantedHash?: string },
    ): Promise<{ settled: boolean; again: boolean; reason?: string; failure?: UpgradeFailure; hold?: boolean }> {
      const deadline = Date.now() + deps.settings.settleTimeoutMs;
      const rollback = applied.wantedHash !== undefined;
      const judge = progressJudge(applied.watch, ref.parks);
      return holdUntil<{ settled: boolean; again: boolean; reason?: string; failure?: UpgradeFailure; hold?: boolean }>(deps, ref, async (look) => {
        const qc = await look.cluster();
        if (!applied.stopping && !rollback && specHash(qc) !== applied.specHash) return { done: { settled: false, again: true } };
        const seen = await look.observe(qc);
        const obs = rollback ? { ...seen, wantedHash: applied.wantedHash! } : seen;
        if (!applied.stopping && outdatedPods(obs).length > 0) return { done: { settled: false, again: true } };
        if (applied.stopping) {
          // A pod that crash-loops on the new version does not come back: nothing to wait for.
          const loop = newVersionFailure({ obs, version: withDefaults(qc.spec).version, watch: null, deadlineMs: 0 });
          if (loop) return { done: { settled: false, again: false, reason: loop } };
        } else if (!rollback) {
          const verdict = judge(qc, obs);
          if (verdict && 'failed' in verdict) return { done: { settled: false, again: false, failure: verdict.failed, ...(verdict.held ? { hold: true } : {}) } };
          if (verdict) return verdict;
        }
        const hold = stopGate({ obs, memory: stallMemory(qc, obs), target: null, opts: gateOptions(deps, obs, 0) });
        let reason = hold?.reason ?? null;
        // Settled as the watches have it: the look from the API server probes.
        if (!reason && look.fromWatch) return ASK_THE_API_SERVER;
        if (!reason) {
          const probe = await probeThrough(deps, qc, obs, null);
          await recordProbe(deps, ref, probe);
          if (probe.ok) return { done: { settled: true, again: false } };
          reason = `a write does not commit: ${probe.error}`;
        }
        if (Date.now() > deadline) return { done: { settled: false, again: false, reason } };
        const waiting = applied.stopping
          ? 'stopping the upgrade once the cluster is whole'
          : rollback
            ? 'every pod went back; waiting for the cluster to settle'
            : 'every pod restarted; waiting for the cluster to settle';
        const waits: Hold = { phase: 'Upgrading', message: `${waiting}: ${reason}`, gate: hold?.gate ?? 'write-commits' };
        return { hold: applied.stopping || rollback ? waits : judge.byDeadline(qc, waits) };
      });
    },

    /**
     * The canary: the first pod on the new version, once Ready, live and caught up, is watched
     * for spec.upgrade.canarySeconds before the next pod moves: it has to stay the same pod, run,
     * stay Ready, live and caught up, and a write has to commit through it (a problem that is
     * not a restart has to be seen twice in a row). A failure fails the upgrade: `failed` with
     * onFailure Rollback; with Hold, `failed` and `hold` where the workflow waits for the person
     * itself (a run that parks its waits), else a hold here until the spec changes. When the soak
     * began is in status.upgrade.canary: an attempt after an operator restart goes on with the
     * time that is left, not from the beginning.
     */
    async awaitCanary(ref: ClusterRef, c: CanaryInput): Promise<CanaryVerdict> {
      const o = c.ordinal;
      let start: CanaryStart | null = null;
      let soakUntil = 0;
      let strikes = 0;
      let failure: string | null = null;
      const failed = (qc: QueenCluster, reason: string): { done: CanaryVerdict } | { hold: Hold } => {
        failure = reason;
        const spec = withDefaults(qc.spec);
        const verdict = { reason, failedVersion: c.version };
        if (spec.upgrade.onFailure === 'Rollback') return { done: { kind: 'failed', failure: verdict } };
        if (ref.parks) return { done: { kind: 'failed', failure: { ...verdict, failedImage: imageRef(spec) }, hold: true } };
        return { hold: failureHold(c.version, reason) };
      };
      const ended = async (qc: QueenCluster) => {
        if (qc.status?.upgrade?.canary) await patchUpgradeStatus(deps, ref, { canary: null });
      };
      const verdict = await holdUntil<CanaryVerdict>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const spec = withDefaults(qc.spec);
        if (specHash(qc) !== c.specHash) return { done: { kind: 'retarget' } };
        // A verdict stands: it waits for a person (or for onFailure to become Rollback).
        if (failure) return failed(qc, failure);
        const obs = await observeCluster(deps, qc);
        const caughtUp = gateOptions(deps, obs, 0).caughtUpEntries;
        if (!start) {
          const broken = newVersionFailure({ obs, version: c.version, watch: { ordinal: o, since: c.since }, deadlineMs: spec.upgrade.progressDeadlineSeconds * 1000 });
          if (broken) return failed(qc, `the canary failed: ${broken}`);
          const pod = podAt(obs, o);
          if (!pod || pod.uid === c.oldUid || !canaryUp(obs, o, caughtUp)) {
            return { hold: { phase: 'Upgrading', message: `pod ${o} is the canary: waiting for it to be Ready, live and caught up on ${c.version}`, gate: 'canary-soaked' } };
          }
          start = { ordinal: o, uid: pod.uid, restarts: pod.restarts };
          // The soak of this very pod began before (an attempt whose operator restarted): it goes on.
          const began = qc.status?.upgrade?.canary;
          const since = began?.podUid === pod.uid && began.version === c.version && began.startedAt ? Date.parse(began.startedAt) : NaN;
          if (Number.isFinite(since)) {
            soakUntil = since + c.seconds * 1000;
          } else {
            soakUntil = Date.now() + c.seconds * 1000;
            await patchUpgradeStatus(deps, ref, { canary: { ordinal: o, podUid: pod.uid, version: c.version, startedAt: new Date().toISOString(), seconds: c.seconds } });
            await stepEvent(deps, qc, 'Canary', canaryLine(o, c.version, c.seconds));
          }
        }
        let problem = canaryProblem(obs, start, caughtUp);
        if (!problem) {
          const pod = podAt(obs, o)!;
          const base = brokerBase(deps.settings.brokerAccess, qc, spec, pod);
          const probe = base ? await probeWrite(base, `pod ${o}`, undefined, undefined, await brokerToken(deps, qc)) : { ok: false as const, error: `pod ${o} has no address` };
          if (!probe.ok) problem = { reason: `a write through pod ${o} does not commit: ${probe.error}`, fatal: false };
        }
        if (problem?.waits) {
          // Not the version's doing: the soak starts again once the node is back.
          soakUntil = Date.now() + c.seconds * 1000;
          await patchUpgradeStatus(deps, ref, { canary: { ordinal: o, podUid: start.uid, version: c.version, startedAt: new Date().toISOString(), seconds: c.seconds } });
        } else if (problem) {
          strikes++;
          if (problem.fatal || strikes >= 2) return failed(qc, `the canary failed: ${problem.reason}`);
        } else {
          strikes = 0;
        }
        const left = soakUntil - Date.now();
        if (left <= 0 && !problem) {
          await stepEvent(deps, qc, 'CanaryPassed', `pod ${o} ran ${c.version} for ${goDuration(c.seconds * 1000)}: Ready, live, caught up, committing writes`);
          return { done: { kind: 'passed' } };
        }
        const checking = problem ? `looking again: ${problem.reason}` : 'checking that it stays Ready, live and caught up and commits writes';
        return {
          hold: { phase: 'Upgrading', message: `pod ${o} is the canary on ${c.version}: ${checking}; ${timeLeftText(left)} left`, gate: 'canary-soaked' },
        };
      });
      await ended(await loadCluster(deps, ref));
      return verdict;
    },

    /**
     * Waits for a person's decision about a new version that failed under onFailure Hold: the
     * verdict is recorded in status.upgrade.held (a later run of the same upgrade holds on it
     * too), and stands whatever the pods do, until spec.upgrade.onFailure becomes Rollback
     * (`rollback`), spec.version or the image changes (`retarget`), or the retry annotation
     * changes (`again`: the version is tried again). A wait for a person: it parks.
     */
    async awaitFailureDecision(ref: ClusterRef, failure: UpgradeFailure): Promise<FailureDecision> {
      return holdUntil<FailureDecision>(deps, ref, async () => {
        const qc = await loadCluster(deps, ref);
        const spec = withDefaults(qc.spec);
        const image = failure.failedImage ?? imageRef(spec);
        const retry = readAnnotations(qc.metadata.annotations).retry;
        let held = qc.status?.upgrade?.held;
        if (!held || held.image !== image) {
          held = { version: failure.failedVersion, image, reason: failure.reason, retryToken: retry, since: new Date().toISOString() };
          await patchUpgradeStatus(deps, ref, { held });
          await stepEvent(deps, qc, 'UpgradeHeld', failureHold(failure.failedVersion, failure.reason, { retry: qc.metadata }).message, 'Warning');
        }
        const decided: FailureDecision | null = imageRef(spec) !== image ? 'retarget' : spec.upgrade.onFailure === 'Rollback' ? 'rollback' : retry !== (held.retryToken ?? '') ? 'again' : null;
        if (!decided) return { hold: failureHold(failure.failedVersion, failure.reason, { retry: qc.metadata, door: previousDoor(qc, await observeCluster(deps, qc)) }) };
        await patchUpgradeStatus(deps, ref, { held: null });
        return { done: decided };
      });
    },

    /**
     * The first step of a rollback: the template recorded before the first pod moved goes back on
     * the StatefulSet (OnDelete: no pod restarts yet), and status.upgrade.rollback says a rollback
     * is under way, so a run that begins later (after a yield, a cancel and a retry, or a lost
     * workflow) finishes it. `impossible` when no template was recorded.
     */
    async applyPreviousTemplate(ref: ClusterRef, failure: UpgradeFailure & { fingerprint: string }): Promise<RollbackTarget | { impossible: string }> {
      const qc = await loadCluster(deps, ref);
      const spec = withDefaults(qc.spec);
      const prev = qc.status?.upgrade?.previous;
      if (!prev?.template || !prev.templateHash) {
        return { impossible: 'no pod template from before the upgrade is recorded (the upgrade began under an operator that did not record it)' };
      }
      const live = await getStatefulSet(deps.kube, ref.namespace, names.statefulSet(ref.name));
      if (!live || live.metadata?.deletionTimestamp) {
        throw ApplicationFailure.nonRetryable(`the StatefulSet ${ref.name} is missing: the cluster has to be formed again`, 'NoStatefulSet');
      }
      const underWay = qc.status?.upgrade?.rollback;
      const target: RollbackTarget = {
        templateHash: prev.templateHash,
        version: prev.version ?? prev.templateHash,
        failedVersion: underWay?.failedVersion ?? failure.failedVersion,
        reason: underWay?.reason ?? failure.reason,
      };
      if (underWay?.templateHash !== target.templateHash || underWay.fingerprint !== failure.fingerprint) {
        await patchUpgradeStatus(deps, ref, {
          rollback: { ...target, fingerprint: failure.fingerprint, startedAt: new Date().toISOString() },
        });
      }
      // The cluster's catalogue version was raised past what the previous version's build reads:
      // its template is not applied (a pod recreated on it would crash-loop); the rollback holds.
      const door = versionDoor(qc.status, await observeCluster(deps, qc), target.version);
      if (door) {
        if (underWay?.fingerprint !== failure.fingerprint) await stepEvent(deps, qc, 'RollBackRefused', rollbackRefusedText(door, target.failedVersion, target.reason), 'Warning');
        return target;
      }
      await applyRollbackTemplate(deps, qc, live, prev, target);
      return target;
    },

    /**
     * Waits until the next pod may go back to the previous template: the one that is not Ready
     * first, then those that do not lead from the highest ordinal, the leader last, through the
     * same stop gate as the upgrade (no approval: the leader only moved forward with one).
     */
    async awaitRollbackRestart(ref: ClusterRef, back: RollbackTarget): Promise<RollbackStep> {
      return holdUntil<RollbackStep>(deps, ref, async (look) => {
        const qc = await look.cluster();
        const obs = { ...(await look.observe(qc)), wantedHash: back.templateHash };
        // No pod goes back to a version that cannot start on the cluster: Blocked, until the spec
        // names another version (the rollback then ends, and the new spec goes on).
        const door = versionDoor(qc.status, obs, back.version);
        if (door) {
          const refused = rollbackRefusedText(door, back.failedVersion, back.reason);
          const underWay = qc.status?.upgrade?.rollback?.fingerprint;
          if (underWay && underWay !== fingerprintOf(qc)) return { done: { kind: 'superseded', message: `${refused}; the spec changed since: it goes on` } };
          return { hold: { phase: 'Blocked', gate: DOOR_GATE, message: refused } };
        }
        // The template goes back before any pod does (it was held while the door was closed).
        if (obs.statefulSet && obs.statefulSet.templateHash !== back.templateHash) {
          if (look.fromWatch) return ASK_THE_API_SERVER;
          const live = await getStatefulSet(deps.kube, ref.namespace, names.statefulSet(ref.name));
          const prev = qc.status?.upgrade?.previous;
          if (live && prev?.template && prev.templateHash === back.templateHash) await applyRollbackTemplate(deps, qc, live, prev, back);
        }
        const pick = nextRestart(obs);
        if (!pick) return { done: { kind: 'done' } };
        const hold = await stopHold(deps, qc, obs, pick.ordinal, { phase: 'Upgrading', next: `rolling back to ${back.version}: pod ${pick.ordinal} is next` }, { fromWatch: look.fromWatch });
        if (hold) return { hold };
        if (look.fromWatch) return ASK_THE_API_SERVER;
        return { done: { kind: 'restart', pick } };
      });
    },

    /** The rollback is over: status.upgrade.rollback goes (the end of the operation says how it went). */
    async endRollback(ref: ClusterRef): Promise<void> {
      await loadCluster(deps, ref);
      await patchUpgradeStatus(deps, ref, { rollback: null });
    },

    /** Which pods run which version now, for the status of a cancelled or yielded upgrade. */
    async describeVersions(ref: ClusterRef): Promise<string> {
      const qc = await loadCluster(deps, ref);
      return versionsText(await observeCluster(deps, qc));
    },
  };
}
