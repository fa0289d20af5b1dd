// The thin watcher: informers on QueenClusters and the objects they own. On every event (and on a
// resync) it looks at one cluster, decides which operation it needs (plan/decide.ts) and
// starts it under the cluster's workflow id, so Temporal itself refuses a second one while one
// runs; it signals a running operation to yield to a more urgent one (once per run), and cancels
// one when asked. It also keeps the cluster's observer running (one per object, by its uid), and
// keeps status true about runs it did not see end: one ended from outside (terminated, reset) and
// one no worker takes up (watcher/runs.ts). No broker calls, no step logic.
import {
  makeInformer,
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type ObjectCache,
  type V1PersistentVolumeClaim,
  type V1Pod,
  type V1Service,
  type V1StatefulSet,
} from '@kubernetes/client-node';
import { Client, WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError, type WorkflowExecutionDescription } from '@temporalio/client';
import type { Logger } from 'pino';
import type { ClusterRef } from '../activities/common.ts';
import { describeKubeError, getCluster, isConflict, patchClusterAnnotations, patchClusterStatus, recordEvent, statusCode, type Kube } from '../activities/kube.ts';
import { claimObservation, podObservation, statefulSetObservation } from '../activities/observe.ts';
import { names, selectorLabels } from '../activities/resources.ts';
import { clusterConditions } from '../activities/status.ts';
import { clusterView } from '../activities/view.ts';
import { readAnnotations } from '../crd/annotations.ts';
import { ANNOTATIONS, GROUP, PLURAL, VERSION, type QueenCluster } from '../crd/schema.ts';
import type { OperationInput } from '../workflows/operation.ts';
import { searchAttributesOf } from '../workflows/search-attributes.ts';
import { decide, OPERATION_TYPES, type Decision, type OperationType, type RunningOperation } from '../plan/decide.ts';
import type { ClaimObservation, PodObservation } from '../plan/observation.ts';
import { endedOutside, noWorkerStatus, Runs, waitingForWorker } from './runs.ts';

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

export const operationWorkflowId = (ns: string, name: string) => `queencluster/${ns}/${name}`;
export const observerWorkflowId = (ns: string, name: string) => `queencluster-observer/${ns}/${name}`;

/** The workflow function behind each operation type. */
const WORKFLOW_OF: Partial<Record<OperationType, string>> = {
  FormCluster: 'formCluster',
  ReplaceNode: 'replaceNode',
  ScaleVoters: 'scaleVoters',
  GrowVolumes: 'growVolumes',
  RollingUpgrade: 'rollingUpgrade',
};
const TYPE_OF: Record<string, OperationType> = Object.fromEntries(
  Object.entries(WORKFLOW_OF).map(([type, workflow]) => [workflow, type as OperationType]),
);
/** The operations that stop at their next wait when asked to yield (nothing is more urgent than forming). */
const YIELDING: ReadonlySet<OperationType> = new Set(['ReplaceNode', 'ScaleVoters', 'GrowVolumes', 'RollingUpgrade']);

export interface WatcherOptions {
  kc: KubeConfig;
  kube: Kube;
  temporal: Client;
  taskQueue: string;
  /** Namespaces to watch; empty means all. */
  namespaces: string[];
  log: Logger;
  resyncMs?: number;
  /** Evaluations of one cluster are at least this far apart (events in between are folded). */
  settleMs?: number;
  /** The operator's search attributes are registered: the workflows it starts carry them. */
  searchAttributes?: boolean;
  /** An operation no worker has taken up this long after its start is said in status. */
  noWorkerAfterMs?: number;
}

interface WatchState {
  kind: string;
  where: string;
  /** The QueenClusters' own list: without one the operator has nothing to do. */
  essential: boolean;
  synced: boolean;
  brokenSince: number | null;
  forbidden: boolean;
  lastError: string | null;
  failures: number;
  begin: () => Promise<void>;
}

interface Caches {
  clusters: ObjectCache<QueenCluster>;
  pods: ObjectCache<V1Pod>;
  statefulSets: ObjectCache<V1StatefulSet>;
  services: ObjectCache<V1Service>;
  claims: ObjectCache<V1PersistentVolumeClaim>;
}

export class Watcher {
  private readonly opts: Required<WatcherOptions>;
  private readonly informers: Informer<KubernetesObject>[] = [];
  private readonly lists: WatchState[] = [];
  /** Where a 403 was said already: once per namespace, whatever the kinds refused there. */
  private readonly forbiddenSaid = new Set<string>();
  private readonly caches: Caches[] = [];
  private readonly pending = new Map<string, NodeJS.Timeout>();
  private readonly busy = new Set<string>();
  private readonly again = new Set<string>();
  /** The object each cluster's observer was last seen to observe, and when that was checked. */
  private readonly observed = new Map<string, { uid: string; at: number }>();
  private readonly cancelled = new Set<string>();
  private readonly yielded = new Set<string>();
  private readonly noWorkerTold = new Set<string>();
  private readonly runs: Runs;
  private resync: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(opts: WatcherOptions) {
    this.opts = { resyncMs: 30_000, settleMs: 300, searchAttributes: false, noWorkerAfterMs: 10_000, ...opts };
    this.runs = new Runs(this.opts.temporal);
  }

  async start(): Promise<void> {
    const scopes = this.opts.namespaces.length > 0 ? this.opts.namespaces : [null];
    for (const ns of scopes) {
      const { kc, kube } = this.opts;
      const at = (path: string) => (ns ? `/api/v1/namespaces/${ns}/${path}` : `/api/v1/${path}`);
      const apps = (path: string) => (ns ? `/apis/apps/v1/namespaces/${ns}/${path}` : `/apis/apps/v1/${path}`);
      const custom = ns ? `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${PLURAL}` : `/apis/${GROUP}/${VERSION}/${PLURAL}`;
      const owned = 'app.kubernetes.io/name=queen';
      const where = ns ? `namespace ${ns}` : 'all namespaces';
      // Custom objects come as plain JSON (timestamps as strings): typed as QueenCluster here.
      const clusters = this.watched<KubernetesObject>(ns, 'QueenClusters', where, true, custom, async () =>
        (ns
          ? kube.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL })
          : kube.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })) as never,
      );
      const pods = this.watched<V1Pod>(ns, 'pods', where, false, at('pods'), () =>
        ns ? kube.core.listNamespacedPod({ namespace: ns, labelSelector: owned }) : kube.core.listPodForAllNamespaces({ labelSelector: owned }),
      owned);
      const statefulSets = this.watched<V1StatefulSet>(ns, 'StatefulSets', where, false, apps('statefulsets'), () =>
        ns ? kube.apps.listNamespacedStatefulSet({ namespace: ns, labelSelector: owned }) : kube.apps.listStatefulSetForAllNamespaces({ labelSelector: owned }),
      owned);
      const services = this.watched<V1Service>(ns, 'Services', where, false, at('services'), () =>
        ns ? kube.core.listNamespacedService({ namespace: ns, labelSelector: owned }) : kube.core.listServiceForAllNamespaces({ labelSelector: owned }),
      owned);
      // Claims made from the StatefulSet's template carry its selector labels.
      const claims = this.watched<V1PersistentVolumeClaim>(ns, 'PersistentVolumeClaims', where, false, at('persistentvolumeclaims'), () =>
        ns
          ? kube.core.listNamespacedPersistentVolumeClaim({ namespace: ns, labelSelector: owned })
          : kube.core.listPersistentVolumeClaimForAllNamespaces({ labelSelector: owned }),
      owned);
      this.caches.push({ clusters: clusters as unknown as ObjectCache<QueenCluster>, pods, statefulSets, services, claims });

      const onCluster = (obj: KubernetesObject) => this.enqueue(obj.metadata!.namespace!, obj.metadata!.name!);
      for (const verb of ['add', 'update', 'delete'] as const) clusters.on(verb, onCluster);
      const onOwned = (obj: KubernetesObject) => {
        const instance = obj.metadata?.labels?.['app.kubernetes.io/instance'];
        if (instance && obj.metadata?.namespace) this.enqueue(obj.metadata.namespace, instance);
      };
      for (const inf of [pods, statefulSets, services, claims] as Informer<KubernetesObject>[]) {
        for (const verb of ['add', 'update', 'delete'] as const) inf.on(verb, onOwned);
      }
    }
    await Promise.all(this.lists.map((l) => l.begin()));
    this.resync = setInterval(() => this.resyncAll(), this.opts.resyncMs);
    this.resyncAll();
  }

  /**
   * An informer whose health is known: synced once a list succeeded, broken from its first error
   * until a list or a watch succeeds again. A watch that fails is started again with a growing
   * pause; one the API server forbids (403) is said once, with what to do, and asked again slowly.
   */
  private watched<T extends KubernetesObject>(
    ns: string | null,
    kind: string,
    where: string,
    essential: boolean,
    path: string,
    list: () => Promise<KubernetesListObject<T>>,
    labelSelector?: string,
  ): Informer<T> & ObjectCache<T> {
    const log = this.opts.log;
    const state: WatchState = { kind, where, essential, synced: false, brokenSince: null, forbidden: false, lastError: null, failures: 0, begin: async () => undefined };
    let inf!: Informer<T> & ObjectCache<T>;
    const failed = (err: unknown) => {
      if (this.stopped) return;
      const forbidden = statusCode(err) === 403 || /\b403\b|forbidden/i.test(String((err as { message?: unknown })?.message ?? err));
      state.brokenSince ??= Date.now();
      state.lastError = forbidden ? 'forbidden' : describeKubeError(err);
      if (forbidden && !state.forbidden && !this.forbiddenSaid.has(where)) {
        this.forbiddenSaid.add(where);
        log.error(
          { kind, where },
          `this operator has no rights in ${where}: the API server forbids watching ${kind} there (403); ` +
            (ns ? `bind the ClusterRole queen-operator in namespace ${ns} with a RoleBinding (as deploy/namespaced.yaml does)` : 'bind the ClusterRole queen-operator with the ClusterRoleBinding of deploy/install.yaml') +
            '; its QueenClusters are left alone until then',
        );
      } else if (!forbidden && state.failures === 0) {
        log.warn({ kind, where, err: state.lastError }, `the watch of ${kind} in ${where} broke; listing again`);
      }
      state.forbidden = forbidden;
      state.failures++;
      const pause = forbidden ? 60_000 : Math.min(30_000, 1000 * 2 ** Math.min(state.failures - 1, 5));
      setTimeout(() => void restart(), pause).unref();
    };
    const restart = async () => {
      if (this.stopped) return;
      const before = state.failures;
      try {
        await inf.start();
      } catch (err) {
        failed(err);
        return;
      }
      if (state.failures === before && state.synced) healed();
    };
    const healed = () => {
      if (state.brokenSince !== null && !state.forbidden) log.info({ kind, where }, `the watch of ${kind} in ${where} works again`);
      if (state.forbidden) {
        log.info({ kind, where }, `this operator may now watch ${kind} in ${where}`);
        this.forbiddenSaid.delete(where);
      }
      state.brokenSince = null;
      state.forbidden = false;
      state.failures = 0;
      state.lastError = null;
    };
    inf = makeInformer<T>(this.opts.kc, path, async () => {
      const result = await list();
      state.synced = true;
      healed();
      return result;
    }, labelSelector);
    inf.on('error', failed);
    state.begin = restart;
    this.lists.push(state);
    this.informers.push(inf as unknown as Informer<KubernetesObject>);
    return inf;
  }

  /** Every QueenCluster as the watches have it, for the per-cluster gauges of /metrics. */
  clusters() {
    return this.caches.flatMap((c) =>
      c.clusters.list().map((qc) => ({
        namespace: qc.metadata.namespace,
        name: qc.metadata.name,
        phase: qc.status?.phase ?? null,
        commits: typeof qc.status?.commits === 'boolean' ? qc.status.commits : null,
        voters: qc.status?.voters?.length ?? 0,
        learners: qc.status?.learners?.length ?? 0,
        term: typeof qc.status?.term === 'number' ? qc.status.term : null,
      })),
    );
  }

  /** What /readyz and /healthz need to know of the watches. */
  watchHealth(): { synced: boolean; brokenFor: number; detail: string } {
    const now = Date.now();
    const usable = this.lists.filter((l) => !l.forbidden);
    const essentialOk = this.lists.some((l) => l.essential && !l.forbidden);
    const unsynced = usable.filter((l) => !l.synced);
    const broken = usable.filter((l) => l.brokenSince !== null);
    const brokenFor = broken.length ? Math.max(...broken.map((l) => now - l.brokenSince!)) : 0;
    const detail = [
      ...unsynced.map((l) => `${l.kind} in ${l.where} not listed yet${l.lastError ? ` (${l.lastError})` : ''}`),
      ...broken.filter((l) => l.synced).map((l) => `${l.kind} in ${l.where} broken for ${Math.round((now - l.brokenSince!) / 1000)}s (${l.lastError ?? ''})`),
      ...this.lists.filter((l) => l.forbidden).map((l) => `${l.kind} in ${l.where} forbidden`),
      ...(essentialOk ? [] : ['no QueenClusters may be watched anywhere']),
    ].join('; ');
    return { synced: essentialOk && unsynced.length === 0, brokenFor, detail };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.resync) clearInterval(this.resync);
    for (const t of this.pending.values()) clearTimeout(t);
    await Promise.all(this.informers.map((inf) => inf.stop().catch(() => undefined)));
  }

  private resyncAll() {
    for (const c of this.caches) for (const qc of c.clusters.list()) this.enqueue(qc.metadata.namespace, qc.metadata.name);
  }

  private enqueue(namespace: string, name: string) {
    if (this.stopped) return;
    const key = `${namespace}/${name}`;
    if (this.busy.has(key)) {
      this.again.add(key);
      return;
    }
    if (this.pending.has(key)) return;
    this.pending.set(
      key,
      setTimeout(() => {
        this.pending.delete(key);
        void this.evaluate(namespace, name);
      }, this.opts.settleMs),
    );
  }

  private cachesFor(namespace: string): Caches | undefined {
    const i = this.opts.namespaces.indexOf(namespace);
    return this.opts.namespaces.length === 0 ? this.caches[0] : i >= 0 ? this.caches[i] : undefined;
  }

  private async evaluate(namespace: string, name: string) {
    const key = `${namespace}/${name}`;
    this.busy.add(key);
    const log = this.opts.log.child({ namespace, name });
    try {
      const caches = this.cachesFor(namespace);
      const cached = caches?.clusters.get(name, namespace);
      if (!caches || !cached || cached.metadata.deletionTimestamp) return;
      await this.ensureObserver(cached, log);
      const running = await this.runningOperation(namespace, name);
      // Status first: a run that ended from outside is recorded before anything is decided on it.
      if (await this.reconcileRecorded(cached, running, log)) return;
      if (!running && readAnnotations(cached.metadata.annotations).cancel) await this.nothingToCancel(namespace, name, log);
      let decision = decide(this.view(cached, caches), running, Date.now());
      if (decision.action === 'start' || decision.action === 'yield') {
        // Decide again on the object as the API server has it now, not as the cache had it.
        const fresh = await getCluster(this.opts.kube, namespace, name);
        if (!fresh || fresh.metadata.uid !== cached.metadata.uid || fresh.metadata.deletionTimestamp) return;
        decision = decide(this.view(fresh, caches), running, Date.now());
        if (decision.action === 'start') await this.startOperation(fresh, decision, log);
        if (decision.action !== 'yield') return;
      }
      await this.act(decision, log);
    } catch (err) {
      log.warn({ err: String(err) }, 'evaluating the cluster failed; trying again at the next event or resync');
    } finally {
      this.busy.delete(key);
      if (this.again.delete(key)) this.enqueue(namespace, name);
    }
  }

  private view(qc: QueenCluster, caches: Caches) {
    const { namespace, name } = qc.metadata;
    const instance = selectorLabels(name)['app.kubernetes.io/instance'];
    const pods = caches.pods
      .list(namespace)
      .filter((p) => p.metadata?.labels?.['app.kubernetes.io/instance'] === instance)
      .map((p) => podObservation(name, p))
      .filter((p): p is PodObservation => p !== null);
    const claims = caches.claims
      .list(namespace)
      .map((c) => claimObservation(name, c))
      .filter((c): c is ClaimObservation => c !== null);
    const svc = (n: string) => {
      const s = caches.services.get(n, namespace);
      return !!s && !s.metadata?.deletionTimestamp;
    };
    return clusterView(qc, {
      statefulSet: statefulSetObservation(qc, caches.statefulSets.get(names.statefulSet(name), namespace) ?? null),
      servicesPresent: svc(names.clientService(name)) && svc(names.headlessService(name)),
      pods,
      claims,
    });
  }

  private async runningOperation(namespace: string, name: string): Promise<RunningOperation | null> {
    const workflowId = operationWorkflowId(namespace, name);
    try {
      const d = await this.opts.temporal.workflow.getHandle(workflowId).describe();
      if (d.status.name !== 'RUNNING') return null;
      const type = TYPE_OF[d.type] ?? (OPERATION_TYPES.includes(d.type as OperationType) ? (d.type as OperationType) : null);
      return type ? { type, workflowId, runId: d.runId } : null;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return null;
      throw err;
    }
  }

  /**
   * The observer runs as long as the QueenCluster exists, and observes that object (its uid): a
   * run left by an object of the same name that was deleted is ended and a new one started, and
   * one that ended (terminated by hand) is started again. Checked again once per resync.
   */
  private async ensureObserver(qc: QueenCluster, log: Logger) {
    const { namespace, name, uid } = qc.metadata;
    const key = `${namespace}/${name}`;
    const seen = this.observed.get(key);
    if (seen && seen.uid === uid && Date.now() - seen.at < this.opts.resyncMs) return;
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
        ...(this.opts.searchAttributes ? { typedSearchAttributes: searchAttributesOf(namespace, name, 'Observer', '') } : {}),
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
  private async reconcileRecorded(qc: QueenCluster, running: RunningOperation | null, log: Logger): Promise<boolean> {
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
          await recordEvent(this.opts.kube, fresh, `${recorded.type}${lastOperation.result}`, lastOperation.message ?? '', 'Warning').catch(() => undefined);
        }
        return true;
      }
    }
    if (running?.runId && recorded?.runId !== running.runId) {
      const d = await this.opts.temporal.workflow.getHandle(running.workflowId, running.runId).describe();
      const waiting = waitingForWorker(d, Date.now(), this.opts.noWorkerAfterMs);
      if (!waiting) return false;
      const fresh = await getCluster(this.opts.kube, namespace, name);
      if (!fresh || fresh.metadata.uid !== qc.metadata.uid || fresh.status?.operation?.runId === running.runId) return false;
      const input = await this.runs.input(running.workflowId, running.runId).catch(() => null);
      const target = (input?.[0] as { target?: unknown } | undefined)?.target;
      const st = noWorkerStatus(running.type, { ...running, runId: running.runId, taskQueue: d.taskQueue, since: waiting.since, target: typeof target === 'string' ? target : null }, Date.now());
      log.warn({ workflowId: running.workflowId, runId: running.runId, taskQueue: d.taskQueue }, st.message);
      const conditions = clusterConditions(fresh.status?.conditions, {
        phase: st.phase,
        message: st.message,
        operation: { type: running.type, step: st.message },
        paused: readAnnotations(fresh.metadata.annotations).pause,
        generation: fresh.metadata.generation,
        now: new Date(),
      });
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
    const workflow = WORKFLOW_OF[decision.need.type];
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
        ...(this.opts.searchAttributes ? { typedSearchAttributes: searchAttributesOf(namespace, name, decision.need.type, decision.need.target) } : {}),
      });
      log.info({ workflowId: handle.workflowId, runId: handle.firstExecutionRunId, type: decision.need.type, target: decision.need.target }, `started ${decision.need.type}`);
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
