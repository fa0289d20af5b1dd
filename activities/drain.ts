// Draining a pod before its node leaves the membership or its pod goes for good. A request on a
// node at the moment it leaves waits out its deadline (the node no longer learns what commits),
// and a pod that is deleted resets what it still holds; so first the pod stops taking client
// connections: its serving label goes to "false", the client Services (which select on it) lose
// it from their endpoints, as the EndpointSlice controller writes them; then the pod stays up for
// the drain wait, while clients see the change and the requests in flight on it finish; only then
// does the step go on. The headless Service keeps it: the raft peers still need each other.
import type { V1EndpointSlice, V1Pod } from '@kubernetes/client-node';
import type { Phase, QueenCluster } from '../crd/schema.ts';
import { podAt, type Observation } from '../plan/observation.ts';
import { podsToServe } from '../plan/serving.ts';
import { listText, podsText } from '../plan/format.ts';
import type { DrainGate } from '../plan/steps.ts';
import { withDefaults } from '../crd/defaults.ts';
import { readHealth } from './broker.ts';
import { loadCluster, observeCluster, opLogger, stepEvent, type ActivityDeps, type ClusterRef } from './common.ts';
import { holdUntil } from './waits.ts';
import { brokerBase } from './observe.ts';
import { getPod, isConflict, isNotFound, listPods, listServices, rawRequest, statusCode, toMs, type Kube } from './kube.ts';
import { names, SERVING_LABEL } from './resources.ts';

/** How often a drain looks at the EndpointSlices: they change within a second of the label. */
const DRAIN_POLL_MS = 100;

/** The pod a drain works on: the one observed (a successor of the same name is not drained). */
export interface DrainTarget {
  ordinal: number;
  name: string;
  uid: string;
  ip: string | null;
}

export interface DrainWords {
  phase: Phase;
  /** The step the drain comes before, e.g. "removing node 5 from the membership". */
  what: string;
  /** The Event, e.g. "taking pod 4 out of the client Service before node 5 leaves the membership". */
  event: string;
}

/**
 * Sets a pod's serving label, if the pod is still the one given (its UID in the patch: the API
 * server refuses a patch whose UID is not the object's). False when that pod is gone.
 */
export async function setServing(kube: Kube, namespace: string, pod: { name: string; uid: string }, serving: boolean): Promise<boolean> {
  try {
    await rawRequest(
      kube.kc,
      'PATCH',
      `/api/v1/namespaces/${namespace}/pods/${encodeURIComponent(pod.name)}`,
      { metadata: { uid: pod.uid, labels: { [SERVING_LABEL]: serving ? 'true' : 'false' } } },
      'application/merge-patch+json',
    );
    return true;
  } catch (err) {
    // Gone (404), or another pod of that name (409, or 422 for a UID that is not the object's).
    if (isNotFound(err) || isConflict(err) || statusCode(err) === 422) return false;
    throw err;
  }
}

/**
 * Puts back in the client Services every pod that should serve (plan/serving.ts): a
 * member's pod that a removal drained and that stays. Only when no step drains one; during a
 * scale-down to `voters`, not the pods of the nodes it removes.
 */
export async function serveAgain(deps: ActivityDeps, ref: Pick<ClusterRef, 'namespace' | 'name'> & { uid?: string }, obs: Observation, voters?: number): Promise<void> {
  for (const pod of podsToServe(obs, voters)) {
    if (await setServing(deps.kube, ref.namespace, pod, true)) {
      opLogger(deps, { namespace: ref.namespace, name: ref.name, uid: ref.uid ?? '' }).info(
        { pod: pod.name },
        pod.serving === null ? `pod ${pod.ordinal} gets the serving label` : `pod ${pod.ordinal} takes client connections again: its node stays a member`,
      );
    }
  }
}

/**
 * Puts back in the client Services every pod that should serve but the one of `except` (a pod a
 * step drains now): for a wait between restarts, where no other step drains a pod.
 */
export async function serveAgainExcept(deps: ActivityDeps, ref: Pick<ClusterRef, 'namespace' | 'name'>, obs: Observation, except: number | null): Promise<void> {
  for (const pod of podsToServe(obs)) {
    if (pod.ordinal === except) continue;
    if (await setServing(deps.kube, ref.namespace, pod, true)) {
      opLogger(deps, { namespace: ref.namespace, name: ref.name, uid: '' }).info({ pod: pod.name }, `pod ${pod.ordinal} takes client connections again: it does not stop now`);
    }
  }
}

/**
 * Labels the pods made before the serving label existed, so that the client Services, once they
 * select on it, still reach them: called before the Services are applied.
 */
export async function labelServing(deps: ActivityDeps, ref: Pick<ClusterRef, 'namespace' | 'name'>): Promise<void> {
  for (const pod of await listPods(deps.kube, ref.namespace, ref.name)) {
    if (pod.metadata?.deletionTimestamp || pod.metadata?.labels?.[SERVING_LABEL] !== undefined) continue;
    await setServing(deps.kube, ref.namespace, { name: pod.metadata!.name!, uid: pod.metadata!.uid! }, true);
  }
}

/** The cluster's Services that select on the serving label (the client Service, the proxy's). */
async function servingServices(kube: Kube, qc: QueenCluster): Promise<string[]> {
  const services = await listServices(kube, qc.metadata.namespace!, qc.metadata.name);
  return services
    .filter((s) => !s.metadata?.deletionTimestamp && s.spec?.selector?.[SERVING_LABEL] === 'true')
    .map((s) => s.metadata!.name!)
    .sort();
}

/** Whether the pod is an endpoint (in any condition) of one of those Services. */
export async function inEndpoints(kube: Kube, namespace: string, services: string[], pod: DrainTarget): Promise<boolean> {
  const selector = encodeURIComponent(`kubernetes.io/service-name in (${services.join(',')})`);
  const list = (await rawRequest(kube.kc, 'GET', `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices?labelSelector=${selector}`)) as {
    items?: V1EndpointSlice[];
  };
  return (list.items ?? []).some((slice) =>
    (slice.endpoints ?? []).some((ep) => ep.targetRef?.uid === pod.uid || (pod.ip !== null && ep.addresses.includes(pod.ip))),
  );
}

/**
 * The pod has not been Ready since its container last started: a successor still starting, or a
 * container restarted and not Ready again. The client Services list it as not ready, and no client
 * was sent anything it still holds. (Its Ready condition went false no later than its containers
 * last started, whole seconds both; or it has no Ready condition, or no container runs.)
 */
export function notReadySinceStart(pod: V1Pod): boolean {
  const ready = pod.status?.conditions?.find((c) => c.type === 'Ready');
  if (ready?.status === 'True') return false;
  const starts = (pod.status?.containerStatuses ?? [])
    .map((c) => toMs(c.state?.running?.startedAt as Date | string | undefined))
    .filter((t): t is number => t !== null);
  if (starts.length === 0) return true;
  const since = toMs(ready?.lastTransitionTime as Date | string | undefined);
  return since === null || since <= Math.min(...starts);
}

/** Whether clients may have sent the pod requests that are still in flight: listed by a client Service, and Ready since it started. */
async function reachable(kube: Kube, namespace: string, services: string[], pod: DrainTarget): Promise<boolean> {
  if (!(await inEndpoints(kube, namespace, services, pod))) return false;
  const live = await getPod(kube, namespace, pod.name);
  return !live || live.metadata?.uid !== pod.uid || !notReadySinceStart(live);
}

/**
 * Drains a pod: its serving label to "false", then waits until it is out of the client Services'
 * endpoints (gate pod-out-of-endpoints), then for the drain wait and until the pod applied what
 * the leader held then (gate requests-drained). A pod no client can have sent anything (no client
 * Service lists it, it is drained already, or it has not been Ready since it started) is only
 * labelled. False when the pod is gone.
 */
export async function drainPod(deps: ActivityDeps, ref: ClusterRef, pod: DrainTarget, words: DrainWords): Promise<boolean> {
  return (await drainPods(deps, ref, [pod], words)).some((p) => p.uid === pod.uid);
}

/**
 * Drains pods side by side (drainPod, one wait for all): the pods of the nodes a scale-down
 * removes go out of the client Services together, so the next removal finds its pod drained
 * already. Returns the pods that were there to drain (the others are gone); `waited` on the array
 * says whether any was reachable by clients and so waited for (false: they were only labelled).
 */
export async function drainPods(deps: ActivityDeps, ref: ClusterRef, pods: DrainTarget[], words: DrainWords): Promise<DrainTarget[] & { waited?: boolean }> {
  const log = opLogger(deps, ref);
  const qc = await loadCluster(deps, ref);
  const services = await servingServices(deps.kube, qc);
  // An older client Service that does not select on the label lists every Ready pod: drained by time only.
  const old = services.length === 0;
  const present: DrainTarget[] = [];
  const listed: DrainTarget[] = [];
  for (const pod of pods) {
    const inService = old || (await reachable(deps.kube, ref.namespace, services, pod));
    if (!(await setServing(deps.kube, ref.namespace, pod, false))) continue;
    present.push(pod);
    if (inService) listed.push(pod);
  }
  if (listed.length === 0) return present;
  await stepEvent(deps, qc, 'DrainPod', words.event);
  Object.assign(present, { waited: true });
  log.info({ pods: listed.map((p) => p.name) }, words.event);
  const fast: ActivityDeps = { ...deps, settings: { ...deps.settings, pollMs: DRAIN_POLL_MS } };
  const which = podsText(listed.map((p) => p.ordinal));
  if (old) {
    // A Service applied by an operator before the label: it reaches the pods whatever their label
    // says, until the next operation applies the Services again.
    log.warn({ service: names.clientService(ref.name) }, `the client Service does not select on ${SERVING_LABEL} yet: ${which} stay in it`);
  } else {
    await holdUntil<true>(fast, ref, async () => {
      await loadCluster(deps, ref);
      const still: number[] = [];
      for (const pod of listed) if (await inEndpoints(deps.kube, ref.namespace, services, pod)) still.push(pod.ordinal);
      if (still.length === 0) return { done: true };
      return { hold: { phase: words.phase, message: `${words.what}: waiting for ${podsText(still)} to leave the client Service's endpoints`, gate: 'pod-out-of-endpoints' satisfies DrainGate } };
    });
  }
  const out = Date.now();
  // A request a pod took is answered once the pod has applied its entry: everything the leader
  // holds now, at most. Waited for only while the pod moves (a node that does not catch up answers
  // nothing more however long one waits), and only for a pod that clients could reach.
  const holdings = await leaderHolds(deps, qc, listed);
  const applied = new Map<string, { index: number; at: number }>();
  await holdUntil<true>(fast, ref, async () => {
    const now = Date.now();
    for (const { pod, index, base } of holdings) {
      const h = await readHealth(base, 1000);
      if (!h || h.applied >= index) continue;
      const seen = applied.get(pod.uid);
      if (seen?.index !== h.applied) applied.set(pod.uid, { index: h.applied, at: now });
      if (now - applied.get(pod.uid)!.at < deps.settings.stallAfterMs) {
        return {
          hold: {
            phase: words.phase,
            message: `${words.what}: letting the requests in flight on pod ${pod.ordinal} finish (${index - h.applied} entries to apply)`,
            gate: 'requests-drained' satisfies DrainGate,
          },
        };
      }
    }
    if (now - out >= deps.settings.drainMs) return { done: true };
    // The last look comes when the drain wait is over, not at the poll after it.
    return { hold: { phase: words.phase, message: `${words.what}: letting the requests in flight on ${which} finish`, gate: 'requests-drained' satisfies DrainGate, lookAgainAt: out + deps.settings.drainMs } };
  });
  return present;
}

/** The leader's last entry and each drained pod's broker address, where both are known. */
async function leaderHolds(deps: ActivityDeps, qc: QueenCluster, pods: DrainTarget[]): Promise<{ pod: DrainTarget; index: number; base: string }[]> {
  const obs = await observeCluster(deps, qc);
  const index = obs.membership?.lastLogIndex ?? null;
  if (index === null) return [];
  const out = [];
  for (const pod of pods) {
    const observed = obs.pods.find((p) => p.uid === pod.uid);
    const base = observed ? brokerBase(deps.settings.brokerAccess, qc, withDefaults(qc.spec), observed) : null;
    if (base) out.push({ pod, index, base });
  }
  return out;
}

/** What a drain takes beyond --drain-wait: the pod leaving the client Services' endpoints. */
export const DRAIN_LEAD_MS = 1500;

/** The pod of an ordinal as drainPod takes it, from an observation. */
export function drainTarget(obs: Observation, ordinal: number): DrainTarget | null {
  const p = podAt(obs, ordinal);
  return p && !p.terminating ? { ordinal, name: p.name, uid: p.uid, ip: p.ip } : null;
}

/**
 * A drain's Event: "taking pods 3 and 4 out of the client Service before nodes 5 and 4 leave the
 * membership", with what comes after `before`.
 */
export function drainEvent(pods: DrainTarget[], before: string): string {
  return `taking ${podsText(pods.map((p) => p.ordinal).sort((a, b) => a - b))} out of the client Service before ${before}`;
}

/** "node 5 leaves" or "nodes 5 and 4 leave": the nodes of these pods, in their order. */
export function nodesLeave(pods: DrainTarget[]): string {
  return pods.length === 1 ? `node ${pods[0]!.ordinal + 1} leaves` : `nodes ${listText(pods.map((p) => String(p.ordinal + 1)))} leave`;
}

/**
 * The pods of the nodes a scale-down removes (members above the voters wanted), highest first,
 * but `except`'s: they are drained together with the first pod a scale-down drains, so each later
 * removal finds its pod out of the client Services already. A leader among them too: the restart
 * that hands its leadership away then finds it drained and stops it at once, where it used to
 * wait a drain of its own (its successor, once Ready, is drained again before its node leaves).
 */
export function leavingPods(qc: Pick<QueenCluster, 'spec'>, obs: Observation, except: number): DrainTarget[] {
  const wanted = withDefaults(qc.spec).replicas;
  const ids = (obs.membership?.members ?? [])
    .map((m) => m.nodeId)
    .filter((id) => id > wanted && id !== except)
    .sort((a, b) => b - a);
  return ids.map((id) => drainTarget(obs, id - 1)).filter((t): t is DrainTarget => t !== null);
}
