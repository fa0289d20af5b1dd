// Taking an Observation of a cluster: its pods, claims and StatefulSet from the API server (or, for
// a cluster at rest, from the process's watches), then /health of every running pod and the
// membership view of the pods that answered, concurrently.
import type { V1Node, V1PersistentVolumeClaim, V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import { withDefaults } from '../crd/defaults.ts';
import { ANNOTATIONS, type QueenCluster, type StoredSpec } from '../crd/schema.ts';
import { goDuration, parseQuantity } from '../plan/format.ts';
import type {
  ClaimObservation,
  HealthObservation,
  MembershipObservation,
  NodeDown,
  Observation,
  PodObservation,
  StatefulSetObservation,
} from '../plan/observation.ts';
import { freshestView, readHealth, readMembershipAnswer } from './broker.ts';
import { readLink } from './link.ts';
import type { OwnedObjects } from './cluster-cache.ts';
import { refusedWords, type BrokerCredentials } from './credentials.ts';
import { getNode, getStatefulSet, listClaims, listPods, listServices, toMs, type Kube } from './kube.ts';
import { CONTAINER, imageRef, imageTag, names, parseOrdinal, podHost, SERVING_LABEL, wantedTemplateHash } from './resources.ts';

/** How the operator reaches a pod's broker port. */
export type BrokerAccessMode = 'dns' | 'pod-ip';

export function brokerBase(mode: BrokerAccessMode, qc: QueenCluster, spec: StoredSpec, pod: PodObservation): string | null {
  if (mode === 'pod-ip') return pod.ip ? `http://${pod.ip.includes(':') ? `[${pod.ip}]` : pod.ip}:${spec.port}` : null;
  return `http://${podHost(qc, spec, pod.ordinal)}:${spec.port}`;
}

/** A scheduler places a pod within a second or two; one not looked at for this long waits for one. */
export const NOT_PLACED_AFTER_MS = 30_000;

/** A pod that no scheduler has looked at (no node, no PodScheduled condition) for a while, in words. */
function notPlaced(pod: V1Pod, looked: boolean, now = Date.now()): string | null {
  if (looked || pod.spec?.nodeName || pod.metadata?.deletionTimestamp) return null;
  const created = toMs(pod.metadata?.creationTimestamp as Date | string | undefined);
  if (created === null || now - created < NOT_PLACED_AFTER_MS) return null;
  return `no scheduler has placed it for ${goDuration(now - created)} (it has no node and no PodScheduled condition: is the kube-scheduler running?)`;
}

export function podObservation(clusterName: string, pod: V1Pod): PodObservation | null {
  const name = pod.metadata?.name ?? '';
  const ordinal = parseOrdinal(clusterName, name);
  if (ordinal < 0) return null;
  const cs = pod.status?.containerStatuses?.find((c) => c.name === CONTAINER);
  const ready = pod.status?.conditions?.find((c) => c.type === 'Ready');
  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  const last = cs?.lastState?.terminated ?? cs?.state?.terminated;
  const serving = pod.metadata?.labels?.[SERVING_LABEL];
  return {
    ordinal,
    name,
    uid: pod.metadata?.uid ?? '',
    terminating: !!pod.metadata?.deletionTimestamp,
    phase: pod.status?.phase ?? 'Pending',
    running: pod.status?.phase === 'Running' && !!cs?.state?.running,
    ready: ready?.status === 'True',
    readySince: ready?.status === 'True' ? toMs(ready.lastTransitionTime as Date | string | undefined) : null,
    serving: serving === undefined ? null : serving === 'true',
    hash: pod.metadata?.annotations?.[ANNOTATIONS.configHash] ?? null,
    image: cs?.image ?? pod.spec?.containers.find((c) => c.name === CONTAINER)?.image ?? null,
    ip: pod.status?.podIP ?? null,
    restarts: cs?.restartCount ?? 0,
    lastExitCode: last?.exitCode ?? null,
    lastExitAt: toMs(last?.finishedAt as Date | string | undefined),
    waitingReason: cs?.state?.waiting?.reason ?? null,
    waitingMessage: cs?.state?.waiting?.message ?? null,
    unschedulable: scheduled?.status === 'False' && scheduled.reason === 'Unschedulable' ? (scheduled.message ?? 'unschedulable') : null,
    notPlaced: notPlaced(pod, scheduled !== undefined),
    scheduledAt: scheduled?.status === 'True' ? toMs(scheduled.lastTransitionTime as Date | string | undefined) : null,
    node: pod.spec?.nodeName ?? null,
    nodeDown: null,
  };
}

/** A node whose Ready condition is not True, in the observation's terms; null when it is Ready. */
export function nodeDown(node: V1Node): NodeDown | null {
  const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
  if (!ready || ready.status === 'True') return null;
  return {
    node: node.metadata?.name ?? '',
    ready: ready.status === 'False' ? 'False' : 'Unknown',
    since: toMs(ready.lastTransitionTime as Date | string | undefined),
    message: ready.status === 'False' ? (ready.message ?? null) : null,
  };
}

/**
 * How old a node's object may be when a look uses it. A node goes NotReady only after the node
 * controller's grace period (40 s by default) and the gates count its time from the condition's
 * own transition, so a few seconds more cost nothing; the pods of a restart are not Ready for
 * many looks in a row, and each would ask for their node again.
 */
const NODE_READ_TTL_MS = 5000;
const nodesRead = new WeakMap<Kube, Map<string, { at: number; node: Promise<V1Node | null> }>>();

/** A node as read within NODE_READ_TTL_MS (the same read for the looks that ask at once), or null when it cannot be read. */
export function readNodeAtMostEvery(kube: Kube, name: string): Promise<V1Node | null> {
  const now = Date.now();
  let read = nodesRead.get(kube);
  if (!read) nodesRead.set(kube, (read = new Map()));
  const hit = read.get(name);
  if (hit && now - hit.at < NODE_READ_TTL_MS) return hit.node;
  for (const [n, r] of read) if (now - r.at >= NODE_READ_TTL_MS) read.delete(n);
  const node = getNode(kube, name).catch(() => null);
  read.set(name, { at: now, node });
  return node;
}

/**
 * The nodes of the pods that are not well (not Ready, not running, stopping, or not answering
 * /health): each read once, so a cluster at rest costs no node reads at all.
 */
async function downNodes(kube: Kube, pods: PodObservation[], health: Record<number, HealthObservation>): Promise<Map<string, NodeDown>> {
  const wanted = new Set(
    pods.filter((p) => p.node && (!p.ready || !p.running || p.terminating || !health[p.ordinal])).map((p) => p.node!),
  );
  const down = new Map<string, NodeDown>();
  await Promise.all(
    [...wanted].map(async (name) => {
      const node = await readNodeAtMostEvery(kube, name);
      const d = node ? nodeDown(node) : null;
      if (d) down.set(name, d);
    }),
  );
  return down;
}

export function claimObservation(clusterName: string, claim: V1PersistentVolumeClaim): ClaimObservation | null {
  const name = claim.metadata?.name ?? '';
  const ordinal = parseOrdinal(clusterName, name, 'data-');
  if (ordinal < 0) return null;
  const request = claim.spec?.resources?.requests?.storage ?? '';
  const pending = claim.status?.conditions?.find((c) => c.type === 'FileSystemResizePending' && c.status === 'True');
  const resizeError = claim.status?.conditions?.find((c) => (c.type === 'ControllerResizeError' || c.type === 'NodeResizeError') && c.status === 'True');
  const nodeError = claim.status?.conditions?.find((c) => c.type === 'NodeResizeError' && c.status === 'True');
  const capacity = claim.status?.capacity?.storage;
  return {
    ordinal,
    name,
    uid: claim.metadata?.uid ?? '',
    terminating: !!claim.metadata?.deletionTimestamp,
    request: String(request),
    requestBytes: parseQuantity(String(request)) || 0,
    capacityBytes: capacity ? parseQuantity(String(capacity)) || 0 : 0,
    resizePending: !!pending,
    resizePendingSince: pending ? toMs(pending.lastTransitionTime as Date | string | undefined) : null,
    resizeError: resizeError?.message ?? null,
    resizeInfeasible: /Infeasible$/.test(claim.status?.allocatedResourceStatuses?.storage ?? ''),
    onlineGrowthFailedAt: pending && nodeError ? toMs(nodeError.lastTransitionTime as Date | string | undefined) : null,
  };
}

export function statefulSetObservation(qc: QueenCluster, sts: V1StatefulSet | null): StatefulSetObservation | null {
  if (!sts) return null;
  return {
    uid: sts.metadata?.uid ?? '',
    replicas: sts.spec?.replicas ?? 0,
    terminating: !!sts.metadata?.deletionTimestamp,
    templateHash: sts.spec?.template.metadata?.annotations?.[ANNOTATIONS.configHash] ?? null,
    specHash: sts.metadata?.annotations?.[ANNOTATIONS.specHash] ?? null,
    claimTemplateSize: (sts.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests?.storage as string | undefined) ?? null,
    ours: !!sts.metadata?.ownerReferences?.some((o) => o.controller && o.uid === qc.metadata.uid),
  };
}

export async function observe(
  kube: Kube,
  mode: BrokerAccessMode,
  qc: QueenCluster,
  now: () => number = Date.now,
  creds: BrokerCredentials = { token: null, problem: null, source: null },
  /** What the cluster owns as the process's watches have it (the observer at rest); else asked of the API server. */
  watched?: OwnedObjects,
): Promise<Observation> {
  const spec = withDefaults(qc.spec);
  const { namespace, name } = qc.metadata;
  const [sts, pods, claims, services] = watched
    ? [watched.statefulSet, watched.pods, watched.claims, watched.services]
    : await Promise.all([
        getStatefulSet(kube, namespace, names.statefulSet(name)),
        listPods(kube, namespace, name),
        listClaims(kube, namespace),
        listServices(kube, namespace, name),
      ]);
  const serviceNames = new Set(services.filter((s) => !s.metadata?.deletionTimestamp).map((s) => s.metadata?.name));
  const podObs = pods
    .map((p) => podObservation(name, p))
    .filter((p): p is PodObservation => p !== null)
    .sort((a, b) => a.ordinal - b.ordinal);
  const claimObs = claims
    .map((c) => claimObservation(name, c))
    .filter((c): c is ClaimObservation => c !== null)
    .sort((a, b) => a.ordinal - b.ordinal);

  const health: Record<number, HealthObservation> = {};
  const answering = podObs.filter((p) => p.running && !p.terminating);
  await Promise.all(
    answering.map(async (p) => {
      const base = brokerBase(mode, qc, spec, p);
      const h = base ? await readHealth(base) : null;
      if (h) health[p.ordinal] = h;
    }),
  );
  let refused: { status: number; error: string } | null = null;
  const ask = (list: PodObservation[]) =>
    Promise.all(
      list.map(async (p) => {
        const base = brokerBase(mode, qc, spec, p);
        const a = base ? await readMembershipAnswer(base, undefined, creds.token) : null;
        if (a?.refused) refused = a.refused;
        return a?.view ? { view: a.view, via: p.ordinal } : null;
      }),
    );
  // The view a decision rests on is the leader's own: asked of the pod that leads in the newest
  // term the pods report (its /health says so), and of the others only when it gives none (no pod
  // leads, or its answer is lost): one call instead of one per pod at every look.
  const answered = answering.filter((p) => health[p.ordinal]);
  const newest = Math.max(...answered.map((p) => health[p.ordinal]!.term));
  const leading = answered.filter((p) => health[p.ordinal]!.role === 'leader' && health[p.ordinal]!.term === newest);
  let views = await ask(leading);
  if (!views.some((v) => v?.view.leader != null && v.view.source === 'leader')) views = [...views, ...(await ask(answered.filter((p) => !leading.includes(p))))];
  const down = await downNodes(kube, podObs, health);
  for (const p of podObs) p.nodeDown = (p.node && down.get(p.node)) || null;
  const r = refused as { status: number; error: string } | null;
  const brokerAuth = creds.problem ?? (r ? refusedWords(creds, r.status, r.error) : null);
  // Only a leader's own view (a follower relays it verbatim) says who is live and caught up now; a
  // follower's aged view of a leader it cannot reach is no ground for a decision.
  const withLeader = views.filter(
    (v): v is { view: MembershipObservation; via: number } => v !== null && v.view.leader !== null && v.view.source === 'leader',
  );
  const best = freshestView(withLeader);
  // The link, asked of the leader (only the standby's leader follows its source).
  const leaderPod = best?.view.leader != null ? podObs.find((p) => p.ordinal === best.view.leader! - 1 && health[p.ordinal]) : undefined;
  const linkBase = leaderPod && (qc.spec.standby || qc.spec.link) ? brokerBase(mode, qc, spec, leaderPod) : null;
  const link = qc.spec.standby || qc.spec.link ? (linkBase ? await readLink(linkBase, leaderPod!.ordinal, creds.token) : null) : undefined;
  return {
    at: now(),
    namespace,
    name,
    voters: spec.replicas,
    minReadySeconds: spec.minReadySeconds,
    wantedHash: wantedTemplateHash(qc),
    wantedVersion: imageTag(imageRef(spec)),
    statefulSet: statefulSetObservation(qc, sts),
    servicesPresent: serviceNames.has(names.clientService(name)) && serviceNames.has(names.headlessService(name)),
    pods: podObs,
    claims: claimObs,
    health,
    membership: best?.view ?? null,
    membershipVia: best?.via ?? null,
    brokerAuth,
    ...(link !== undefined ? { link } : {}),
  };
}
