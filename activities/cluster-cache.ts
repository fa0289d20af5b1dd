// One set of watches per operator process on the QueenClusters and the objects they own (pods,
// StatefulSets, Services, claims), in the namespaces the operator watches. The watcher decides on
// them; the observer reads a resting cluster from them instead of asking the API server at every
// look, so a cluster at rest costs the API server nothing but its own status writes. Each watch's
// health is known (synced, broken since when, forbidden), for /readyz and /healthz.
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
import type { Logger } from 'pino';
import { GROUP, PLURAL, VERSION, type QueenCluster } from '../crd/schema.ts';
import { describeKubeError, statusCode, type Kube } from './kube.ts';
import { names, selectorLabels } from './resources.ts';

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

interface Scope {
  clusters: ObjectCache<QueenCluster>;
  pods: ObjectCache<V1Pod>;
  statefulSets: ObjectCache<V1StatefulSet>;
  services: ObjectCache<V1Service>;
  claims: ObjectCache<V1PersistentVolumeClaim>;
  /** Every watch of this scope has listed, and none is broken now. */
  fresh: () => boolean;
}

/** What the pods, the StatefulSet, the Services and the claims of one cluster are, as watched. */
export interface OwnedObjects {
  statefulSet: V1StatefulSet | null;
  pods: V1Pod[];
  services: V1Service[];
  claims: V1PersistentVolumeClaim[];
}

/**
 * What changed: the QueenCluster's spec, annotations or deletion (`spec`), only its status
 * (`status`), an object it owns (`owned`), or an object it owns is gone from the API server
 * (`gone`: the end of a stop or a deletion, not one of a burst of changes).
 */
export type Change = 'spec' | 'status' | 'owned' | 'gone';

/** The label every object of a QueenCluster carries: the watches select on it. */
const OWNED = 'app.kubernetes.io/name=queen';

export class ClusterCache {
  private readonly informers: Informer<KubernetesObject>[] = [];
  private readonly lists: WatchState[] = [];
  /** Where a 403 was said already: once per namespace, whatever the kinds refused there. */
  private readonly forbiddenSaid = new Set<string>();
  private readonly scopes: Scope[] = [];
  private readonly listeners: Array<(namespace: string, name: string, what: Change) => void> = [];
  /** What of each QueenCluster is not its status (generation, annotations, deletion), as last seen. */
  private readonly specOf = new Map<string, string>();
  private started: Promise<void> | null = null;
  private stopped = false;

  private readonly kc: KubeConfig;
  private readonly kube: Kube;
  /** Namespaces to watch; empty means all. */
  private readonly namespaces: string[];
  private readonly log: Logger;

  constructor(kc: KubeConfig, kube: Kube, namespaces: string[], log: Logger) {
    this.kc = kc;
    this.kube = kube;
    this.namespaces = namespaces;
    this.log = log;
  }

  /**
   * Called with a cluster's namespace and name whenever it or an object it owns changes. Returns
   * what stops the calls (a wait that ended).
   */
  onChange(listener: (namespace: string, name: string, what: Change) => void): () => void {
    this.listeners.push(listener);
    return () => {
      const i = this.listeners.indexOf(listener);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  /** Starts the watches (once, whoever asks first) and resolves once each has listed or failed once. */
  start(): Promise<void> {
    this.started ??= this.begin();
    return this.started;
  }

  private async begin(): Promise<void> {
    const scopes = this.namespaces.length > 0 ? this.namespaces : [null];
    for (const ns of scopes) {
      const { kube } = this;
      const at = (path: string) => (ns ? `/api/v1/namespaces/${ns}/${path}` : `/api/v1/${path}`);
      const apps = (path: string) => (ns ? `/apis/apps/v1/namespaces/${ns}/${path}` : `/apis/apps/v1/${path}`);
      const custom = ns ? `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${PLURAL}` : `/apis/${GROUP}/${VERSION}/${PLURAL}`;
      const where = ns ? `namespace ${ns}` : 'all namespaces';
      const first = this.lists.length;
      // Custom objects come as plain JSON (timestamps as strings): typed as QueenCluster here.
      const clusters = this.watched<KubernetesObject>(ns, 'QueenClusters', where, true, custom, async () =>
        (ns
          ? kube.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: PLURAL })
          : kube.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: PLURAL })) as never,
      );
      const pods = this.watched<V1Pod>(ns, 'pods', where, false, at('pods'), () =>
        ns ? kube.core.listNamespacedPod({ namespace: ns, labelSelector: OWNED }) : kube.core.listPodForAllNamespaces({ labelSelector: OWNED }),
      OWNED);
      const statefulSets = this.watched<V1StatefulSet>(ns, 'StatefulSets', where, false, apps('statefulsets'), () =>
        ns ? kube.apps.listNamespacedStatefulSet({ namespace: ns, labelSelector: OWNED }) : kube.apps.listStatefulSetForAllNamespaces({ labelSelector: OWNED }),
      OWNED);
      const services = this.watched<V1Service>(ns, 'Services', where, false, at('services'), () =>
        ns ? kube.core.listNamespacedService({ namespace: ns, labelSelector: OWNED }) : kube.core.listServiceForAllNamespaces({ labelSelector: OWNED }),
      OWNED);
      // Claims made from the StatefulSet's template carry its selector labels.
      const claims = this.watched<V1PersistentVolumeClaim>(ns, 'PersistentVolumeClaims', where, false, at('persistentvolumeclaims'), () =>
        ns
          ? kube.core.listNamespacedPersistentVolumeClaim({ namespace: ns, labelSelector: OWNED })
          : kube.core.listPersistentVolumeClaimForAllNamespaces({ labelSelector: OWNED }),
      OWNED);
      const mine = this.lists.slice(first);
      this.scopes.push({
        clusters: clusters as unknown as ObjectCache<QueenCluster>,
        pods,
        statefulSets,
        services,
        claims,
        fresh: () => mine.every((l) => l.synced && l.brokenSince === null),
      });

      const onCluster = (obj: KubernetesObject) => {
        const m = obj.metadata!;
        const key = `${m.namespace}/${m.name}`;
        const spec = `${m.uid}|${m.generation}|${JSON.stringify(m.annotations ?? {})}|${m.deletionTimestamp ?? ''}`;
        const what: Change = this.specOf.get(key) === spec ? 'status' : 'spec';
        this.specOf.set(key, spec);
        this.changed(m.namespace!, m.name!, what);
      };
      for (const verb of ['add', 'update', 'delete'] as const) clusters.on(verb, onCluster);
      const onOwned = (what: 'owned' | 'gone') => (obj: KubernetesObject) => {
        const instance = obj.metadata?.labels?.['app.kubernetes.io/instance'];
        if (instance && obj.metadata?.namespace) this.changed(obj.metadata.namespace, instance, what);
      };
      for (const inf of [pods, statefulSets, services, claims] as Informer<KubernetesObject>[]) {
        for (const verb of ['add', 'update'] as const) inf.on(verb, onOwned('owned'));
        inf.on('delete', onOwned('gone'));
      }
    }
    await Promise.all(this.lists.map((l) => l.begin()));
  }

  private changed(namespace: string, name: string, what: Change): void {
    for (const l of [...this.listeners]) l(namespace, name, what);
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
    const log = this.log;
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
    inf = makeInformer<T>(this.kc, path, async () => {
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

  /** What /readyz and /healthz need to know of the watches. */
  health(): { synced: boolean; brokenFor: number; detail: string } {
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
    await Promise.all(this.informers.map((inf) => inf.stop().catch(() => undefined)));
  }

  private scopeOf(namespace: string): Scope | undefined {
    if (this.namespaces.length === 0) return this.scopes[0];
    const i = this.namespaces.indexOf(namespace);
    return i >= 0 ? this.scopes[i] : undefined;
  }

  /** Every QueenCluster as watched. */
  clusters(): QueenCluster[] {
    return this.scopes.flatMap((s) => s.clusters.list());
  }

  /** The QueenCluster as watched (undefined when it is not there, or not watched). */
  cluster(namespace: string, name: string): QueenCluster | undefined {
    return this.scopeOf(namespace)?.clusters.get(name, namespace);
  }

  /**
   * The cluster and what it owns as watched, or null when the watches of its namespace cannot be
   * trusted now (not listed yet, or broken): the caller then asks the API server.
   */
  snapshot(namespace: string, name: string): { cluster: QueenCluster | null; owned: OwnedObjects } | null {
    const scope = this.scopeOf(namespace);
    if (!scope || !scope.fresh()) return null;
    return { cluster: scope.clusters.get(name, namespace) ?? null, owned: this.ownedIn(scope, namespace, name) };
  }

  /** What one cluster owns as watched (its pods by their instance label, its claims by their names). */
  owned(namespace: string, name: string): OwnedObjects {
    const scope = this.scopeOf(namespace);
    if (!scope) return { statefulSet: null, pods: [], services: [], claims: [] };
    return this.ownedIn(scope, namespace, name);
  }

  private ownedIn(scope: Scope, namespace: string, name: string): OwnedObjects {
    const instance = selectorLabels(name)['app.kubernetes.io/instance'];
    const mine = (o: KubernetesObject) => o.metadata?.labels?.['app.kubernetes.io/instance'] === instance;
    return {
      statefulSet: scope.statefulSets.get(names.statefulSet(name), namespace) ?? null,
      pods: scope.pods.list(namespace).filter(mine),
      services: scope.services.list(namespace).filter(mine),
      claims: [...scope.claims.list(namespace)],
    };
  }
}
