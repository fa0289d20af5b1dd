// The thin watcher: informers on QueenClusters and the objects they own. On every event (and on a
// resync) it looks at one cluster, decides which operation it needs (plan/decide.ts) and
// starts it under the cluster's workflow id, so Temporal itself refuses a second one while one
// runs; it signals a running operation to yield to a more urgent one (once per run), and cancels
// one when asked. It also keeps the cluster's observer running (one per object, by its uid), and
// keeps status true about runs it did not see end: one ended from outside (terminated, reset) and
// one no worker takes up (watcher/runs.ts). An operation that waits for a person (parked, see
// workflows/operation.ts) is told to look again when its cluster changes. While an operation runs
// and only its steps' status moves, Temporal is asked about it at most every describeGapMs. No
// broker calls, no step logic.
import { Client, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type WorkflowExecutionDescription } from '@temporalio/client';
import type { Logger } from 'pino';
import type { ClusterRef } from '../activities/common.ts';
import { wakeToken } from '../activities/waits.ts';
import { getCluster, isConflict, patchClusterAnnotations, patchClusterStatus, recordEvent, type Kube } from '../activities/kube.ts';
import type { ClusterCache } from '../activities/cluster-cache.ts';
import { claimObservation, podObservation, statefulSetObservation } from '../activities/observe.ts';
import { names } from '../activities/resources.ts';
import { clusterConditions } from '../activities/status.ts';
import { clusterView } from '../activities/view.ts';
import { readAnnotations } from '../crd/annotations.ts';
import { ANNOTATIONS, type Phase, type QueenCluster } from '../crd/schema.ts';
import type { OperationInput } from '../workflows/operation.ts';
import { searchAttributesOf } from '../workflows/search-attributes.ts';
import { operationsEnded } from '../metrics.ts';
import { decide, neededOperation, OPERATION_TYPES, type Decision, type Need, type OperationType, type RunningOperation } from '../plan/decide.ts';
import type { ClaimObservation, PodObservation } from '../plan/observation.ts';
import { endedOutside, lostAttempts, noWorkerStatus, Runs, stuckRun, stuckStatus, waitingForWorker } from './runs.ts';
import { heldByGoneProcess, PROCESS } from '../identity.ts';
import { Backups } from './backups.ts';
import { restoring } from '../plan/backup.ts';

/** What the Web UI shows of an operation beside its steps: what it is for and where to look. */
function operationDetails(type: string, ns: string, name: string, target: string): string {
  return [
    `**${type}** of the QueenCluster \`${ns}/${name}\`, towards: ${target}`,
    '',
    'Each step is an activity named by its line of the README; a waiting step names the gate that holds it in its heartbeat.',
    `The same lines, as they happen: \`kubectl -n ${ns} describe queencluster ${name}\` (Events) and \`kubectl -n ${ns} get queencluster ${name} -o wide\` (status).`,
    `Cancel: the Cancel button, or \`kubectl -n ${ns} annotate queencluster ${name} queenmq.com/cancel=true\`.`,
  ].join('\n');
}

function observerDetails(ns: string, name: string): string {
  return [
    `The observer of the QueenCluster \`${ns}/${name}\`: health, membership and the write probe behind COMMITS into its status, as long as it exists.`,
    `Its operations: \`QueenNamespace = "${ns}" AND QueenCluster = "${name}"\`.`,
  ].join('\n');
}

/** The gates of the lines the watcher writes for an operation (what holds it that its steps cannot say). */
const SAID_BY_WATCHER = new Set<string>(['worker-polling', 'step-succeeds']);

/** The conditions of a QueenCluster with this phase and message written by the watcher. */
function conditionsWith(qc: QueenCluster, phase: Phase, message: string, operation: { type: string; step: string | null }) {
  return clusterConditions(qc.status?.conditions, {
    phase,
    message,
    operation,
    paused: readAnnotations(qc.metadata.annotations).pause,
    generation: qc.metadata.generation,
    now: new Date(),
  });
}

export const operationWorkflowId = (ns: string, name: string) => `queencluster/${ns}/${name}`;
export const observerWorkflowId = (ns: string, name: string) => `queencluster-observer/${ns}/${name}`;

/** The workflow function behind each operation type. */
const WORKFLOW_OF: Partial<Record<OperationType, string>> = {
  FormCluster: 'formCluster',
  ReplaceNode: 'replaceNode',
  ScaleVoters: 'scaleVoters',
  GrowVolumes: 'growVolumes',
  RollingUpgrade: 'rollingUpgrade',
  PromoteStandby: 'promoteStandby',
  Switchover: 'switchover',
};
const TYPE_OF: Record<string, OperationType> = {
  ...Object.fromEntries(Object.entries(WORKFLOW_OF).map(([type, workflow]) => [workflow, type as OperationType])),
  // A cluster formed from a backup (spec.bootstrap.fromBackup) forms through its own workflow.
  restoreCluster: 'FormCluster',
};
/** The operations that stop at their next wait when asked to yield (nothing is more urgent than forming). */
const YIELDING: ReadonlySet<OperationType> = new Set(['ReplaceNode', 'ScaleVoters', 'GrowVolumes', 'RollingUpgrade']);

/**
 * How often the observers are checked where the worker runs in the same process and tells of a
 * run it found gone: 200 resting clusters were 7 describes a second when checked every resync.
 */
export const OBSERVER_CHECK_BESIDE_WORKER_MS = 300_000;

/**
 * Whether a cluster's observer is asked about again, `sinceMs` after the last time: at the first
 * resync once `checkMs` has nearly passed. A check is made a moment into a resync, so the resync a
 * period later finds it a few ms short of the period: a strict bound put every other resync's
 * check off (an observer terminated by hand waited up to 60 s for a check every 30 s).
 */
export function observerCheckDue(sinceMs: number, checkMs: number, resyncMs: number): boolean {
  return sinceMs >= checkMs - Math.min(resyncMs, checkMs) / 2;
}

export interface WatcherOptions {
  /** The process's watches on the QueenClusters and what they own. */
  cache: ClusterCache;
  kube: Kube;
  temporal: Client;
  taskQueue: string;
  log: Logger;
  resyncMs?: number;
  /**
   * How often a resync asks Temporal whether each cluster's observer still runs (a describe per
   * cluster; by default every resync). Where the worker runs in the same process, a round that
   * finds its run gone at a heartbeat says so at once (observerLost), and a new process asks for
   * every cluster at its start: there this is only the net under both, and can be rarer
   * (OBSERVER_CHECK_BESIDE_WORKER_MS).
   */
  observerCheckMs?: number;
  /**
   * Evaluations of one cluster are at least this far apart (events in between are folded into
   * one); an event after a quiet spell is evaluated at once.
   */
  settleMs?: number;
  /** Whether the operator's search attributes are registered now: the workflows it starts then carry them. */
  searchAttributes?: () => boolean;
  /** An operation no worker has taken up this long after its start is said in status. */
  noWorkerAfterMs?: number;
  /**
   * A worker runs in this process on the same connection: an operation's first workflow task is
   * handed to it with the start (Temporal's eager start), not through the task queue's matching,
   * where 50 operations starting at once waited for pollers. Without a free slot here the server
   * queues it as usual.
   */
  eagerStart?: boolean;
  /**
   * While an operation runs, its steps write status at every move, and each write is an event
   * here. What a decision rests on (the run recorded, the spec, the annotations, the operation
   * the cluster needs, the last one's end) is mostly the same from one to the next: Temporal is
   * then asked about the run at most this often, and once more this long after the last event
   * it was not asked at. (50 upgrades at once were 1341 describes in 40 s, 27 an upgrade; with the
   * gap 482, and the Temporal server, on the same cores, answered the steps' own calls 1.4 to 1.9
   * times as fast.)
   */
  describeGapMs?: number;
}

/** What a decision of the watcher rests on, from the watches: when it is the same, so is the decision (but for Temporal's side). */
function decisionInputs(qc: QueenCluster, need: Need | null): string {
  const op = qc.status?.operation;
  return JSON.stringify([
    qc.metadata.uid,
    qc.metadata.generation,
    qc.metadata.annotations ?? {},
    op ? [op.type, op.runId, op.yieldTo ?? null] : null,
    qc.status?.lastOperation ?? null,
    need,
  ]);
}

export class Watcher {
  private readonly opts: Required<WatcherOptions>;
  private readonly pending = new Map<string, NodeJS.Timeout>();
  /** When each cluster was last evaluated (performance.now()). */
  private readonly lastEvaluated = new Map<string, number>();
  private readonly busy = new Set<string>();
  private readonly again = new Set<string>();
  /** The object each cluster's observer was last seen to observe, and when that was checked. */
  private readonly observed = new Map<string, { uid: string; at: number }>();
  private readonly cancelled = new Set<string>();
  private readonly yielded = new Set<string>();
  /** Parked runs told to look again, by `<run id>/<token>`: once per change. */
  private readonly woken = new Set<string>();
  private readonly noWorkerTold = new Set<string>();
  /** Runs said to be stuck (`<run id>/<kind>`): their Event once, their line again only when it changes. */
  private readonly stuckTold = new Set<string>();
  /** The inputs of each cluster's last decision made with Temporal asked, and when (performance.now()). */
  private readonly decided = new Map<string, { inputs: string; at: number }>();
  /** Clusters with an evaluation due at the end of their describe gap. */
  private readonly dueAfterGap = new Set<string>();
  private readonly runs: Runs;
  /** Each cluster's backup Schedule and backups on demand (watcher/backups.ts). */
  private readonly backups: Backups;
  private resync: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(opts: WatcherOptions) {
    const resyncMs = opts.resyncMs ?? 30_000;
    this.opts = {
      settleMs: 300,
      searchAttributes: () => false,
      noWorkerAfterMs: 10_000,
      eagerStart: false,
      describeGapMs: 5000,
      ...opts,
      resyncMs,
      observerCheckMs: opts.observerCheckMs ?? resyncMs,
    };
    this.runs = new Runs(this.opts.temporal);
    this.backups = new Backups({ temporal: this.opts.temporal, taskQueue: this.opts.taskQueue, searchAttributes: this.opts.searchAttributes });
  }

  async start(): Promise<void> {
    this.opts.cache.onChange((namespace, name) => this.enqueue(namespace, name));
    await this.opts.cache.start();
    this.resync = setInterval(() => this.resyncAll(), this.opts.resyncMs);
    this.resyncAll();
  }

  /**
   * Looks at once at a cluster whose observer run may have ended (an observer round of this
   * process found its activity gone: the run was terminated, or its round moved elsewhere).
   */
  observerLost(namespace: string, name: string): void {
    this.observed.delete(`${namespace}/${name}`);
    this.enqueue(namespace, name);
  }

  /** Stops deciding (the watches are the process's: main.ts stops them). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.resync) clearInterval(this.resync);
    for (const t of this.pending.values()) clearTimeout(t);
  }

  /**
   * Every cluster is looked at again once a resync period, spread over the period (hundreds of
   * clusters at one moment would be hundreds of Temporal calls in a burst, which an operation
   * starting then would queue behind).
   */
  private resyncAll() {
    const clusters = this.opts.cache.clusters();
    const cache = this.opts.cache;
    void this.backups
      .sweep((ns, name) => cache.snapshot(ns, name)?.cluster ?? undefined, (ns) => cache.snapshot(ns, '') !== null, this.opts.log)
      .catch((err) => this.opts.log.warn({ err: String(err) }, 'looking for backup Schedules no cluster wants failed; trying again later'));
    const gap = clusters.length > 1 ? Math.min(1000, this.opts.resyncMs / 2 / clusters.length) : 0;
    clusters.forEach((qc, i) => {
      const later = setTimeout(() => this.enqueue(qc.metadata.namespace, qc.metadata.name), i * gap);
      later.unref();
    });
  }

  private enqueue(namespace: string, name: string) {
    if (this.stopped) return;
    const key = `${namespace}/${name}`;
    if (this.busy.has(key)) {
      this.again.add(key);
      return;
    }
    if (this.pending.has(key)) return;
    // The first event after a quiet spell is looked at at once (a spec change starts its operation
    // without a delay); the events that follow within settleMs are folded into one look after it.
    const last = this.lastEvaluated.get(key);
    const delay = last === undefined ? 0 : Math.max(0, last + this.opts.settleMs - performance.now());
    this.pending.set(
      key,
      setTimeout(() => {
        this.pending.delete(key);
        void this.evaluate(namespace, name);
      }, delay),
    );
  }

  private async evaluate(namespace: string, name: string) {
    const key = `${namespace}/${name}`;
    this.busy.add(key);
    this.lastEvaluated.set(key, performance.now());
    const log = this.opts.log.child({ namespace, name });
    try {
      const cached = this.opts.cache.cluster(namespace, name);
      if (!cached) {
        this.lastEvaluated.delete(key);
        this.decided.delete(key);
      }
      if (!cached || cached.metadata.deletionTimestamp) {
        await this.backups.removed(namespace, name, log).catch((err) => log.warn({ err: String(err) }, 'deleting the backup Schedule failed; trying again later'));
        return;
      }
      await this.ensureObserver(cached, log);
      await this.backups.reconcile(cached, log).catch((err) => log.warn({ err: String(err) }, 'the backup Schedule or a backup on demand could not be set up; trying again at the next event or resync'));
      // At rest (no operation recorded, none needed, nothing to cancel) there is nothing to ask
      // Temporal: whatever runs or not, nothing would be started, yielded or cancelled. Hundreds of
      // resting clusters then cost the watcher no call at their status writes and resyncs.
      const view = this.view(cached);
      await this.wakeParked(cached, view, log);
      const need = neededOperation(view);
      const cancel = readAnnotations(cached.metadata.annotations).cancel;
      if (!cached.status?.operation && !cancel && !need) return;
      // The same inputs as a decision made a moment ago (a step's status write): the same decision,
      // so Temporal is not asked again until the gap is over, when this cluster is looked at again.
      const inputs = decisionInputs(cached, need);
      const last = this.decided.get(key);
      if (last && last.inputs === inputs && performance.now() - last.at < this.opts.describeGapMs) {
        this.evaluateAfterGap(namespace, name, last.at + this.opts.describeGapMs - performance.now());
        return;
      }
      const asked = performance.now();
      // An operation may start (one is needed, none is recorded, no cancel to clear first): the
      // object as the API server has it now is asked for alongside Temporal, so the start waits for
      // one round trip, not two in a row (under load each takes up to a few hundred milliseconds).
      // Used only if nothing runs.
      const early = need && !cached.status?.operation && !cancel ? getCluster(this.opts.kube, namespace, name) : null;
      early?.catch(() => undefined); // unused when something runs; a failure is thrown where it is awaited
      const { running, description } = await this.runningOperation(namespace, name);
      if (description) await this.retryLost(description, log);
      // Status first: a run that ended from outside is recorded before anything is decided on it.
      if (await this.reconcileRecorded(cached, running, description, log)) return;
      if (!running && cancel) await this.nothingToCancel(namespace, name, log);
      let decision = decide(view, running, Date.now());
      if (decision.action === 'start' || decision.action === 'yield') {
        // Decide again on the object as the API server has it now, not as the cache had it.
        const fresh = early && !running ? await early : await getCluster(this.opts.kube, namespace, name);
        if (!fresh || fresh.metadata.uid !== cached.metadata.uid || fresh.metadata.deletionTimestamp) return;
        decision = decide(this.view(fresh), running, Date.now());
        if (decision.action === 'start') await this.startOperation(fresh, decision, log);
        if (decision.action !== 'yield') return;
        // Asked already, by this replica or another: the run said in status that it yields once
        // its step is done, and a second signal would only lengthen its history.
        const op = fresh.status?.operation;
        if (op?.yieldTo && op.runId === decision.running.runId) return;
      }
      await this.act(decision, log);
      this.decided.set(key, { inputs, at: asked });
    } catch (err) {
      log.warn({ err: String(err) }, 'evaluating the cluster failed; trying again at the next event or resync');
    } finally {
      this.busy.delete(key);
      if (this.again.delete(key)) this.enqueue(namespace, name);
    }
  }

  /**
   * An operation parked at a wait for a person (status.operation.parked) looks again when the
   * cluster is no longer what it was when it parked: its spec, annotations or objects changed (an
   * approval, the end of a pause, a decision). Once per run and change; the run recorded in status
   * is signalled as it is, without asking Temporal first, and a run that ended meanwhile is let be.
   * A change that makes it yield or cancel (a more urgent operation, the cancel annotation) ends
   * the wait by itself: no look again then.
   */
  private async wakeParked(qc: QueenCluster, view: ReturnType<Watcher['view']>, log: Logger) {
    const op = qc.status?.operation;
    if (!op?.parked || !op.runId) return;
    const type = TYPE_OF[op.type] ?? (OPERATION_TYPES.includes(op.type as OperationType) ? (op.type as OperationType) : null);
    const action = type ? decide(view, { type, workflowId: op.workflowId, runId: op.runId }, Date.now()).action : null;
    if (action === 'yield' || action === 'cancel') return;
    const token = wakeToken(qc, this.opts.cache.owned(qc.metadata.namespace, qc.metadata.name));
    if (token === op.parked.token) return;
    const key = `${op.runId}/${token}`;
    if (this.woken.has(key)) return;
    if (this.woken.size > 10_000) this.woken.clear();
    this.woken.add(key);
    log.info({ workflowId: op.workflowId, runId: op.runId, gate: op.gate }, `${op.type} waits for a person at ${op.gate ?? 'a gate'}, and the cluster changed: telling it to look again`);
    try {
      // The look-again signal of workflows/operation.ts.
      await this.opts.temporal.workflow.getHandle(op.workflowId, op.runId).signal('look-again');
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return;
      this.woken.delete(key);
      throw err;
    }
  }

  /** Evaluates the cluster again once its describe gap is over (one such evaluation due at a time). */
  private evaluateAfterGap(namespace: string, name: string, ms: number) {
    const key = `${namespace}/${name}`;
    if (this.dueAfterGap.has(key)) return;
    this.dueAfterGap.add(key);
    setTimeout(() => {
      this.dueAfterGap.delete(key);
      this.enqueue(namespace, name);
    }, Math.max(0, ms) + 1).unref();
  }

  private view(qc: QueenCluster) {
    const { namespace, name } = qc.metadata;
    const owned = this.opts.cache.owned(namespace, name);
    const pods = owned.pods.map((p) => podObservation(name, p)).filter((p): p is PodObservation => p !== null);
    const claims = owned.claims.map((c) => claimObservation(name, c)).filter((c): c is ClaimObservation => c !== null);
    const svc = (n: string) => owned.services.some((s) => s.metadata?.name === n && !s.metadata?.deletionTimestamp);
    return clusterView(qc, {
      statefulSet: statefulSetObservation(qc, owned.statefulSet),
      servicesPresent: svc(names.clientService(name)) && svc(names.headlessService(name)),
      pods,
      claims,
    });
  }

  /** The operation that runs now, and how Temporal describes its run. */
  private async runningOperation(namespace: string, name: string): Promise<{ running: RunningOperation | null; description: WorkflowExecutionDescription | null }> {
    const workflowId = operationWorkflowId(namespace, name);
    try {
      const d = await this.opts.temporal.workflow.getHandle(workflowId).describe();
      if (d.status.name !== 'RUNNING') return { running: null, description: null };
      const type = TYPE_OF[d.type] ?? (OPERATION_TYPES.includes(d.type as OperationType) ? (d.type as OperationType) : null);
      return type ? { running: { type, workflowId, runId: d.runId }, description: d } : { running: null, description: null };
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return { running: null, description: null };
      throw err;
    }
  }

  /**
   * Fails, so Temporal tries them again at once, the attempts of a run that an earlier process of
   * this pod had taken (the operator restarted in its container): otherwise an observer's round
   * waits out its heartbeat timeout, its status standing still meanwhile, and a step its own.
   */
  private async retryLost(d: WorkflowExecutionDescription, log: Logger): Promise<void> {
    for (const lost of lostAttempts(d, (identity) => heldByGoneProcess(identity, PROCESS))) {
      log.info({ workflowId: d.workflowId, runId: d.runId, activityId: lost.activityId, attempt: lost.attempt, was: lost.identity }, `${lost.activityType} was taken by an earlier process of this pod (${lost.identity}), which is gone: trying it again now`);
      await this.opts.temporal.activity
        .fail({ workflowId: d.workflowId, runId: d.runId, activityId: lost.activityId }, new Error(`the operator process that ran this attempt (${lost.identity}) is gone`))
        .catch((err: unknown) => log.debug({ err: String(err) }, 'the lost attempt ended already'));
    }
  }

  /**
   * The observer runs as long as the QueenCluster exists, and observes that object (its uid): a
   * run left by an object of the same name that was deleted is ended and a new one started, and
   * one that ended (terminated by hand) is started again. Checked again once per observerCheckMs,
   * and at once when a round of this process found its run gone.
   */
  private async ensureObserver(qc: QueenCluster, log: Logger) {
    const { namespace, name, uid } = qc.metadata;
    const key = `${namespace}/${name}`;
    const seen = this.observed.get(key);
    if (seen && seen.uid === uid && !observerCheckDue(Date.now() - seen.at, this.opts.observerCheckMs, this.opts.resyncMs)) return;
    const workflowId = observerWorkflowId(namespace, name);
    let current: WorkflowExecutionDescription | null = null;
    try {
      current = await this.opts.temporal.workflow.getHandle(workflowId).describe();
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
    if (current?.status.name === 'RUNNING') {
      const owner = (await this.runs.startedFor(workflowId, current.runId)).uid;
      if (owner === null || owner === uid) {
        await this.retryLost(current, log);
        this.observed.set(key, { uid: uid!, at: Date.now() });
        return;
      }
      log.info({ workflowId, runId: current.runId, uid: owner }, `the observer run observes a QueenCluster ${key} that was deleted: ending it, observing the new one`);
      await this.opts.temporal.workflow
        .getHandle(workflowId, current.runId)
        .terminate(`its QueenCluster ${key} (uid ${owner}) was deleted; the one of that name now has uid ${uid}`)
        .catch((err) => {
          if (!(err instanceof WorkflowNotFoundError)) throw err;
        });
    } else if (seen?.uid === uid) {
      log.info({ workflowId }, 'the observer is not running (ended from outside): starting it again');
    }
    const ref: ClusterRef = { namespace, name, uid: uid! };
    try {
      await this.opts.temporal.workflow.start('clusterObserver', {
        workflowId,
        taskQueue: this.opts.taskQueue,
        args: [ref, null],
        workflowIdConflictPolicy: 'USE_EXISTING',
        staticSummary: `observes the QueenCluster ${namespace}/${name}`,
        staticDetails: observerDetails(namespace, name),
        ...(this.opts.searchAttributes() ? { typedSearchAttributes: searchAttributesOf(namespace, name, 'Observer', '') } : {}),
      });
      log.debug('observer running');
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    this.observed.set(key, { uid: uid!, at: Date.now() });
  }

  /**
   * Keeps status.operation true about runs the operation itself could not report on. A run named
   * there that is no longer running ended from outside (terminated, timed out): it is cleared,
   * status.lastOperation says how it ended, and the phase is assessed again by the observer. A
   * reset goes on in a new run of the same operation: status.operation follows it. A run that no
   * worker has taken up for a while says so, naming the task queue. True when status changed.
   */
  private async reconcileRecorded(qc: QueenCluster, running: RunningOperation | null, description: WorkflowExecutionDescription | null, log: Logger): Promise<boolean> {
    const { namespace, name } = qc.metadata;
    const recorded = qc.status?.operation ?? null;
    if (recorded?.runId && recorded.runId !== running?.runId) {
      const end = await this.runs.end(recorded.workflowId, recorded.runId).catch((err) => {
        if (err instanceof WorkflowNotFoundError || /not found/i.test(String(err))) return null;
        throw err;
      });
      if (end) {
        const fresh = await getCluster(this.opts.kube, namespace, name);
        if (!fresh || fresh.metadata.uid !== qc.metadata.uid || fresh.status?.operation?.runId !== recorded.runId) return false;
        if (running && running.type === recorded.type) {
          log.info({ workflowId: running.workflowId, runId: running.runId, was: recorded.runId }, `${recorded.type} goes on in a new run (a reset)`);
          await this.patchStatus(fresh, { operation: { runId: running.runId } });
          return true;
        }
        if (end.status === 'COMPLETED' || end.status === 'CONTINUED_AS_NEW') {
          await this.patchStatus(fresh, { operation: null });
          return true;
        }
        const startedFor = await this.runs.startedFor(recorded.workflowId, recorded.runId).catch(() => ({ uid: null, fingerprint: null, retryToken: null }));
        const lastOperation = endedOutside(recorded, end, startedFor, { namespace, name }, new Date());
        log.warn({ workflowId: recorded.workflowId, runId: recorded.runId, how: end.status, reason: end.reason, identity: end.identity }, lastOperation.message ?? '');
        if (await this.patchStatus(fresh, { operation: null, lastOperation })) {
          // Counted once: the write is a compare-and-set, which one replica wins.
          operationsEnded.inc({ type: recorded.type, result: lastOperation.result });
          await recordEvent(this.opts.kube, fresh, `${recorded.type}${lastOperation.result}`, lastOperation.message ?? '', 'Warning').catch(() => undefined);
        }
        return true;
      }
    }
    if (running?.runId && recorded?.runId === running.runId && description) {
      // The run began, then stopped moving for a reason none of its steps can say. (One whose first
      // task no worker took has its own line, noWorkerStatus below.)
      if (waitingForWorker(description, Date.now(), 0)) return false;
      const stuck = stuckRun(description, Date.now(), this.opts.noWorkerAfterMs);
      if (!stuck && !SAID_BY_WATCHER.has(recorded.gate ?? '')) return false;
      const fresh = await getCluster(this.opts.kube, namespace, name);
      const op = fresh?.status?.operation;
      if (!fresh || fresh.metadata.uid !== qc.metadata.uid || op?.runId !== running.runId) return false;
      if (!stuck) {
        // It moves again, and its next step has not said anything yet: its last line, without the hold.
        if (SAID_BY_WATCHER.has(op.gate ?? '')) await this.patchStatus(fresh, { message: op.step ?? '', operation: { gate: null } });
        return false;
      }
      const said = stuckStatus(running.type, op, stuck, { workflowId: running.workflowId, taskQueue: description.taskQueue }, Date.now());
      // Said once a stretch (the seconds waited move at every look; its first line is enough until it changes kind).
      const key = `${running.runId}/${stuck.kind}`;
      if (this.stuckTold.has(key) && op.gate === said.gate) return false;
      log.warn({ workflowId: running.workflowId, runId: running.runId, stuck: stuck.kind }, said.message);
      const conditions = conditionsWith(fresh, (fresh.status?.phase ?? 'Ready') as Phase, said.message, { type: running.type, step: op.step ?? null });
      if (await this.patchStatus(fresh, { message: said.message, operation: { gate: said.gate }, conditions })) {
        if (!this.stuckTold.has(key)) await recordEvent(this.opts.kube, fresh, stuck.kind === 'no-worker' ? 'NoWorker' : 'StepFailing', said.message, 'Warning').catch(() => undefined);
        this.stuckTold.add(key);
      }
      return false;
    }
    if (running?.runId && recorded?.runId !== running.runId && description) {
      const waiting = waitingForWorker(description, Date.now(), this.opts.noWorkerAfterMs);
      if (!waiting) return false;
      const fresh = await getCluster(this.opts.kube, namespace, name);
      if (!fresh || fresh.metadata.uid !== qc.metadata.uid || fresh.status?.operation?.runId === running.runId) return false;
      const input = await this.runs.input(running.workflowId, running.runId).catch(() => null);
      const target = (input?.[0] as { target?: unknown } | undefined)?.target;
      const st = noWorkerStatus(running.type, { ...running, runId: running.runId, taskQueue: description.taskQueue, since: waiting.since, target: typeof target === 'string' ? target : null }, Date.now());
      log.warn({ workflowId: running.workflowId, runId: running.runId, taskQueue: description.taskQueue }, st.message);
      const conditions = conditionsWith(fresh, st.phase, st.message, { type: running.type, step: st.message });
      if ((await this.patchStatus(fresh, { ...st, conditions })) && !this.noWorkerTold.has(running.runId)) {
        this.noWorkerTold.add(running.runId);
        await recordEvent(this.opts.kube, fresh, 'NoWorker', st.message, 'Warning').catch(() => undefined);
      }
      return true;
    }
    return false;
  }

  /** A status patch of the object as it was read (compare-and-set: a newer write wins). */
  private async patchStatus(qc: QueenCluster, status: Record<string, unknown>): Promise<boolean> {
    try {
      await patchClusterStatus(this.opts.kube, qc.metadata.namespace, qc.metadata.name, status, qc.metadata.resourceVersion);
      return true;
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
  }

  /**
   * A cancel annotation with no operation running would cancel the next one: it is removed, with
   * an Event that says so. On the object as the API server has it now, and only if it has not
   * changed since (a cancelled operation removes its own annotation before it ends).
   */
  private async nothingToCancel(namespace: string, name: string, log: Logger) {
    const fresh = await getCluster(this.opts.kube, namespace, name);
    if (!fresh || fresh.metadata.deletionTimestamp || !readAnnotations(fresh.metadata.annotations).cancel) return;
    try {
      await patchClusterAnnotations(this.opts.kube, namespace, name, { [ANNOTATIONS.cancel]: null }, fresh.metadata.resourceVersion);
    } catch (err) {
      if (isConflict(err)) return;
      throw err;
    }
    const message = `no operation runs, so there is nothing to cancel: the ${ANNOTATIONS.cancel} annotation was removed, and cancels nothing that starts later`;
    log.info(message);
    await recordEvent(this.opts.kube, fresh, 'NothingToCancel', message).catch((err) => log.warn({ err: String(err) }, 'could not record an Event'));
  }

  private async startOperation(qc: QueenCluster, decision: Extract<Decision, { action: 'start' }>, log: Logger) {
    const { namespace, name, uid } = qc.metadata;
    const workflow = decision.need.type === 'FormCluster' && restoring(qc) ? 'restoreCluster' : WORKFLOW_OF[decision.need.type];
    if (!workflow) return;
    const input: OperationInput = {
      ref: { namespace, name, uid: uid! },
      fingerprint: decision.need.fingerprint,
      target: decision.need.target,
      retryToken: decision.retryToken,
    };
    try {
      const handle = await this.opts.temporal.workflow.start(workflow, {
        workflowId: operationWorkflowId(namespace, name),
        taskQueue: this.opts.taskQueue,
        args: [input],
        staticSummary: `${decision.need.type} of ${namespace}/${name}: ${decision.need.target}`,
        staticDetails: operationDetails(decision.need.type, namespace, name, decision.need.target),
        requestEagerStart: this.opts.eagerStart,
        ...(this.opts.searchAttributes() ? { typedSearchAttributes: searchAttributesOf(namespace, name, decision.need.type, decision.need.target) } : {}),
      });
      log.info(
        { workflowId: handle.workflowId, runId: handle.firstExecutionRunId, type: decision.need.type, target: decision.need.target, eager: handle.eagerlyStarted },
        `started ${decision.need.type}`,
      );
      // Looked at again once a worker should have taken it up.
      setTimeout(() => this.enqueue(namespace, name), this.opts.noWorkerAfterMs + 1000).unref();
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) {
        log.debug({ type: decision.need.type }, 'an operation already runs');
        return;
      }
      throw err;
    }
  }

  private async act(decision: Decision, log: Logger) {
    switch (decision.action) {
      case 'yield': {
        // Once per run: the operation keeps the request until its next safe point.
        if (!YIELDING.has(decision.running.type)) return;
        const runKey = `${decision.running.workflowId}/${decision.running.runId}`;
        if (this.yielded.has(runKey)) return;
        this.yielded.add(runKey);
        log.info({ running: decision.running.type, need: decision.need.type }, `asking ${decision.running.type} to yield to ${decision.need.type}`);
        try {
          await this.opts.temporal.workflow.getHandle(decision.running.workflowId, decision.running.runId).signal('yield', decision.need.type);
        } catch (err) {
          this.yielded.delete(runKey);
          throw err;
        }
        return;
      }
      case 'cancel': {
        const runKey = `${decision.running.workflowId}/${decision.running.runId}`;
        if (this.cancelled.has(runKey)) return;
        this.cancelled.add(runKey);
        log.info({ running: decision.running.type }, `cancelling ${decision.running.type}: the queenmq.com/cancel annotation asks for it`);
        await this.opts.temporal.workflow.getHandle(decision.running.workflowId, decision.running.runId).cancel();
        return;
      }
      default:
        return;
    }
  }
}
