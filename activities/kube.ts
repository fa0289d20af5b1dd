// Kubernetes reads and writes: the QueenCluster and its status, server-side apply of the objects
// it owns, deletes with UID preconditions, and Events.
import { createHash } from 'node:crypto';
import { request as undiciRequest } from 'undici';
import {
  ApiException,
  RequestContext,
  type HttpMethod,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  PolicyV1Api,
  setHeaderOptions,
  type CoreV1Event,
  type KubernetesObject,
  type V1LabelSelector,
  type V1Node,
  type V1PersistentVolumeClaim,
  type V1Pod,
  type V1StatefulSet,
} from '@kubernetes/client-node';
import { GROUP, PLURAL, VERSION, type QueenCluster, type QueenClusterStatus } from '../crd/schema.ts';
import { FIELD_MANAGER, selectorLabels } from './resources.ts';

export interface Kube {
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  custom: CustomObjectsApi;
  objects: KubernetesObjectApi;
  policy: PolicyV1Api;
}

export function makeKube(kc: KubeConfig): Kube {
  return {
    kc,
    core: kc.makeApiClient(CoreV1Api),
    apps: kc.makeApiClient(AppsV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    objects: KubernetesObjectApi.makeApiClient(kc),
    policy: kc.makeApiClient(PolicyV1Api),
  };
}

/**
 * A kubeconfig whose requests share their connections. @kubernetes/client-node 2.0 gives every
 * request a dispatcher of its own (a new TLS connection, its handshake, then its close); here the
 * first one made for a cluster and user is kept and given to every request after it, so requests
 * to the API server reuse their connections as client-go's do. The credentials a request carries
 * in its headers (a token, read again as it rotates) are still applied per request.
 */
export class PooledKubeConfig extends KubeConfig {
  private readonly dispatchers = new Map<string, NonNullable<ReturnType<RequestContext['getDispatcher']>>>();

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const made = context.getDispatcher();
    if (!made) return;
    const key = JSON.stringify([this.getCurrentCluster()?.name, this.getCurrentCluster()?.server, this.getCurrentUser()?.name]);
    const kept = this.dispatchers.get(key);
    if (!kept) {
      this.dispatchers.set(key, made);
      return;
    }
    context.setDispatcher(kept);
    // The one made for this request has no connection yet: it goes.
    void (made as { close?: () => Promise<void> }).close?.().catch(() => undefined);
  }
}

/** Loads a kubeconfig: an explicit file, else KUBECONFIG / ~/.kube/config / the in-cluster account. */
export function loadKubeConfig(file?: string): KubeConfig {
  const kc = new PooledKubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  return kc;
}

export const statusCode = (err: unknown): number | null =>
  err instanceof ApiException ? err.code : typeof (err as { code?: unknown })?.code === 'number' ? (err as { code: number }).code : null;

export const isNotFound = (err: unknown) => statusCode(err) === 404;
export const isConflict = (err: unknown) => statusCode(err) === 409;

/** The message of a Kubernetes API error (the Status object's message when there is one). */
export function apiErrorMessage(err: unknown): string {
  if (err instanceof ApiException) {
    const body = err.body as unknown;
    if (typeof body === 'string') {
      try {
        const parsed = JSON.parse(body) as { message?: string };
        if (parsed.message) return parsed.message;
      } catch {
        return body;
      }
    }
    if (body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string') {
      return (body as { message: string }).message;
    }
  }
  return err instanceof Error ? err.message : String(err);
}

/** What went wrong reaching the API server, in one line. */
export function describeKubeError(err: unknown): string {
  const code = statusCode(err);
  if (code === 401) return 'it refuses our credentials (401): the token or certificate of the kubeconfig is not valid there';
  if (code !== null) return `it answered ${code}: ${apiErrorMessage(err)}`;
  return networkWords(err);
}
// ---- words --------------------------------------------------------------------------------------

/** A failed connection in words: refused, no name, no answer, or the error's own message. */
export function networkWords(err: unknown): string {
  const e = err as { code?: string; cause?: { code?: string; message?: string }; message?: string };
  const code = e?.code ?? e?.cause?.code;
  const text = `${e?.message ?? ''} ${e?.cause?.message ?? ''} ${String(err)}`;
  if (code === 'ECONNREFUSED' || /ConnectionRefused|connection refused|ECONNREFUSED/i.test(text)) return 'connection refused (is it running, and is this its address?)';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || /dns error|failed to lookup|ENOTFOUND|Name or service not known|EAI_AGAIN/i.test(text)) {
    return 'its name does not resolve';
  }
  if (code === 'ETIMEDOUT' || /timed? ?out|deadline exceeded/i.test(text)) return 'no answer in time';
  if (code === 'ECONNRESET' || code === 'EPIPE' || /ECONNRESET|connection reset|broken pipe|BrokenPipe|ConnectionReset/i.test(text)) return 'the connection broke at once';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || /unreachable/i.test(text)) return 'no route to it';
  // A gRPC transport's error: its innermost words, not the dump.
  const inner = /error: \\?"([^"\\]+)\\?"/.exec(text) ?? /kind: (\w+)/.exec(text);
  if (/transport error|tonic::/.test(text)) return inner ? `transport error: ${inner[1]}` : 'transport error';
  const first = (e?.message ?? String(err)).split('\n')[0]!;
  return first.length > 300 ? `${first.slice(0, 300)}...` : first;
}
/** A timestamp the client may hand back as a Date or a string, in ms (null when absent). */
export function toMs(t: Date | string | undefined | null): number | null {
  if (!t) return null;
  const ms = t instanceof Date ? t.getTime() : Date.parse(t);
  return Number.isFinite(ms) ? ms : null;
}

export async function getCluster(kube: Kube, namespace: string, name: string): Promise<QueenCluster | null> {
  try {
    return (await kube.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURAL, name })) as QueenCluster;
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/**
 * A merge patch of the status: fields left out stay as they are, null removes a field. With a
 * resourceVersion it is a compare-and-set: a 409 if the object changed since it was read.
 */
export async function patchClusterStatus(
  kube: Kube,
  namespace: string,
  name: string,
  status: Partial<Record<keyof QueenClusterStatus, unknown>>,
  resourceVersion?: string,
) {
  const body = resourceVersion ? { metadata: { resourceVersion }, status } : { status };
  await kube.custom.patchNamespacedCustomObjectStatus({ group: GROUP, version: VERSION, namespace, plural: PLURAL, name, body }, mergePatch);
}

/**
 * Sets (string) or removes (null) annotations of the QueenCluster. With a resourceVersion it is a
 * compare-and-set: a 409 if the object changed since it was read.
 */
export async function patchClusterAnnotations(kube: Kube, namespace: string, name: string, annotations: Record<string, string | null>, resourceVersion?: string) {
  const metadata = resourceVersion ? { resourceVersion, annotations } : { annotations };
  await kube.custom.patchNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURAL, name, body: { metadata } }, mergePatch);
}

/** An error answer of the API server, with its HTTP status as `code` (like the client's ApiException). */
export class KubeApiError extends Error {
  readonly code: number;
  readonly body: unknown;
  constructor(code: number, message: string, body: unknown) {
    super(message);
    this.name = 'KubeApiError';
    this.code = code;
    this.body = body;
  }
}

/** Where each kind the operator applies lives in the API. */
const RESOURCES: Record<string, { prefix: string; plural: string; namespaced: boolean }> = {
  'v1/Service': { prefix: '/api/v1', plural: 'services', namespaced: true },
  'v1/Namespace': { prefix: '/api/v1', plural: 'namespaces', namespaced: false },
  'v1/ServiceAccount': { prefix: '/api/v1', plural: 'serviceaccounts', namespaced: true },
  'apps/v1/StatefulSet': { prefix: '/apis/apps/v1', plural: 'statefulsets', namespaced: true },
  'apps/v1/Deployment': { prefix: '/apis/apps/v1', plural: 'deployments', namespaced: true },
  'policy/v1/PodDisruptionBudget': { prefix: '/apis/policy/v1', plural: 'poddisruptionbudgets', namespaced: true },
  'networking.k8s.io/v1/NetworkPolicy': { prefix: '/apis/networking.k8s.io/v1', plural: 'networkpolicies', namespaced: true },
  'rbac.authorization.k8s.io/v1/ClusterRole': { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'clusterroles', namespaced: false },
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'clusterrolebindings', namespaced: false },
  'apiextensions.k8s.io/v1/CustomResourceDefinition': { prefix: '/apis/apiextensions.k8s.io/v1', plural: 'customresourcedefinitions', namespaced: false },
};

/** A request with the kubeconfig's credentials, the body sent as the JSON it is. */
export async function rawRequest(kc: KubeConfig, method: 'GET' | 'PATCH' | 'POST' | 'DELETE', path: string, body?: unknown, contentType = 'application/json'): Promise<unknown> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig names no cluster');
  const ctx = new RequestContext(`${cluster.server.replace(/\/$/, '')}${path}`, method as HttpMethod);
  await kc.applySecurityAuthentication(ctx);
  const res = await undiciRequest(ctx.getUrl(), {
    method,
    dispatcher: ctx.getDispatcher(),
    headers: { ...ctx.getHeaders(), accept: 'application/json', ...(body === undefined ? {} : { 'content-type': contentType }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.body.text();
  let json: unknown = text;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: keep the text
  }
  if (res.statusCode >= 400) {
    const message = (json as { message?: string } | undefined)?.message ?? text;
    throw new KubeApiError(res.statusCode, message, json);
  }
  return json;
}

/**
 * Whether the API server says it is ready (GET /readyz answers 200; the path is open to every
 * caller). Just after it starts it serves requests before its authorizer has read the roles and
 * bindings, and refuses them (403) meanwhile; /readyz says so until it has (informer-sync).
 */
export async function apiServerReady(kc: KubeConfig): Promise<boolean> {
  try {
    await rawRequest(kc, 'GET', '/readyz');
    return true;
  } catch {
    return false;
  }
}

/**
 * Server-side apply under the operator's field manager. The object goes to the API server as the
 * JSON it is (the typed client would re-serialize it and drop what its models name differently,
 * such as a schema's `enum` and `default`).
 */
export async function applyObject<T extends KubernetesObject>(kube: Kube, obj: T): Promise<T> {
  const where = RESOURCES[`${obj.apiVersion}/${obj.kind}`];
  if (!where) throw new Error(`the operator does not apply ${obj.kind} (${obj.apiVersion})`);
  const ns = where.namespaced ? `/namespaces/${obj.metadata?.namespace}` : '';
  const path = `${where.prefix}${ns}/${where.plural}/${obj.metadata?.name}?fieldManager=${FIELD_MANAGER}&force=true`;
  return (await rawRequest(kube.kc, 'PATCH', path, obj, PatchStrategy.ServerSideApply)) as T;
}

/**
 * Deletes the cluster's NetworkPolicy when it is turned off: only one this QueenCluster controls,
 * with a UID precondition.
 */
export async function deleteOwnedNetworkPolicy(kube: Kube, qc: QueenCluster, name: string): Promise<boolean> {
  const live = await readObject<KubernetesObject>(kube, 'networking.k8s.io/v1', 'NetworkPolicy', qc.metadata.namespace, name);
  const ours = live?.metadata?.ownerReferences?.some((o) => o.controller && o.uid === qc.metadata.uid);
  if (!live || !ours || live.metadata?.deletionTimestamp) return false;
  try {
    await rawRequest(kube.kc, 'DELETE', `/apis/networking.k8s.io/v1/namespaces/${qc.metadata.namespace}/networkpolicies/${name}`, {
      apiVersion: 'v1',
      kind: 'DeleteOptions',
      preconditions: { uid: live.metadata!.uid },
    });
    return true;
  } catch (err) {
    if (isNotFound(err) || isConflict(err)) return false;
    throw err;
  }
}

/** Reads an object by kind and name; null when it does not exist. */
export async function readObject<T extends KubernetesObject>(kube: Kube, apiVersion: string, kind: string, namespace: string, name: string): Promise<T | null> {
  try {
    return (await kube.objects.read({ apiVersion, kind, metadata: { name, namespace } })) as T;
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

export async function listPods(kube: Kube, namespace: string, clusterName: string): Promise<V1Pod[]> {
  const list = await kube.core.listNamespacedPod({ namespace, labelSelector: labelSelector(clusterName) });
  return list.items;
}

export async function listServices(kube: Kube, namespace: string, clusterName: string) {
  const list = await kube.core.listNamespacedService({ namespace, labelSelector: labelSelector(clusterName) });
  return list.items;
}

export async function listClaims(kube: Kube, namespace: string): Promise<V1PersistentVolumeClaim[]> {
  const list = await kube.core.listNamespacedPersistentVolumeClaim({ namespace });
  return list.items;
}

export async function getStatefulSet(kube: Kube, namespace: string, name: string): Promise<V1StatefulSet | null> {
  try {
    return await kube.apps.readNamespacedStatefulSet({ namespace, name });
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

/**
 * A node, or null when it is gone or the operator may not read nodes (an operator bound in one
 * namespace has no right to cluster-scoped objects: its words then do not name a node's state).
 */
export async function getNode(kube: Kube, name: string): Promise<V1Node | null> {
  try {
    return await kube.core.readNode({ name });
  } catch (err) {
    if (isNotFound(err) || statusCode(err) === 403) return null;
    throw err;
  }
}

export async function getPod(kube: Kube, namespace: string, name: string): Promise<V1Pod | null> {
  try {
    return await kube.core.readNamespacedPod({ namespace, name });
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

/**
 * Deletes a pod only if it is still the one that was observed (UID precondition). Returns false
 * when that pod is already gone or replaced, so a retried step never stops its successor.
 */
export async function deletePodByUid(kube: Kube, namespace: string, name: string, uid: string): Promise<boolean> {
  try {
    await kube.core.deleteNamespacedPod({ namespace, name, body: { preconditions: { uid } } });
    return true;
  } catch (err) {
    if (isNotFound(err) || isConflict(err)) return false;
    throw err;
  }
}

/**
 * Evicts a pod through the Eviction API, only if it still has this UID: the API server stops it as
 * a delete would, but only when its disruption budget allows it, and counts it against the budget,
 * so that a drain or another eviction at the same moment cannot take a second pod down.
 * 'refused': the budget allows no disruption now (429). 'shared-budget': more than one
 * PodDisruptionBudget selects the pod, which the Eviction API never evicts (500, whatever the
 * budgets allow) until a person removes the extra one.
 */
export async function evictPodByUid(kube: Kube, namespace: string, name: string, uid: string): Promise<'evicted' | 'gone' | 'refused' | 'shared-budget'> {
  try {
    await kube.core.createNamespacedPodEviction({
      namespace,
      name,
      body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace }, deleteOptions: { preconditions: { uid } } },
    });
    return 'evicted';
  } catch (err) {
    if (isNotFound(err) || isConflict(err)) return 'gone';
    if (statusCode(err) === 429) return 'refused';
    if (statusCode(err) === 500 && /more than one PodDisruptionBudget/i.test(apiErrorMessage(err))) return 'shared-budget';
    throw err;
  }
}

/** A LabelSelector (as a PodDisruptionBudget carries it) in the query syntax of `?labelSelector=`, so the API server itself matches it. */
export function selectorQuery(sel: V1LabelSelector): string {
  const terms = Object.entries(sel.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of sel.matchExpressions ?? []) {
    const values = `(${(e.values ?? []).join(',')})`;
    if (e.operator === 'In') terms.push(`${e.key} in ${values}`);
    else if (e.operator === 'NotIn') terms.push(`${e.key} notin ${values}`);
    else if (e.operator === 'Exists') terms.push(e.key);
    else if (e.operator === 'DoesNotExist') terms.push(`!${e.key}`);
  }
  return terms.join(',');
}

/** The names of the PodDisruptionBudgets of a namespace that select this pod, as the API server matches their selectors. */
export async function budgetsSelecting(kube: Kube, namespace: string, podName: string): Promise<string[]> {
  const budgets = await kube.policy.listNamespacedPodDisruptionBudget({ namespace });
  const out: string[] = [];
  for (const pdb of budgets.items) {
    const sel = pdb.spec?.selector;
    if (!sel) continue;
    const pods = await kube.core.listNamespacedPod({ namespace, labelSelector: selectorQuery(sel) });
    if (pods.items.some((p) => p.metadata?.name === podName)) out.push(pdb.metadata?.name ?? '');
  }
  return out.sort();
}

/** Deletes a claim only if it is still the one that was recorded (UID precondition). */
/** A claim as the API server has it now, or null when there is none of that name. */
export async function getClaim(kube: Kube, namespace: string, name: string): Promise<V1PersistentVolumeClaim | null> {
  try {
    return await kube.core.readNamespacedPersistentVolumeClaim({ namespace, name });
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

export async function deleteClaimByUid(kube: Kube, namespace: string, name: string, uid: string): Promise<boolean> {
  try {
    await kube.core.deleteNamespacedPersistentVolumeClaim({ namespace, name, body: { preconditions: { uid } } });
    return true;
  } catch (err) {
    if (isNotFound(err) || isConflict(err)) return false;
    throw err;
  }
}

export function labelSelector(clusterName: string): string {
  return Object.entries(selectorLabels(clusterName))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

/**
 * The Events this process wrote lately, by what they say, so a repeat is counted on the same Event
 * (as the Kubernetes event recorder does) rather than written again.
 */
const recentEvents = new Map<string, Folded>();

/**
 * The step an Event records: `<run id>/<activity id>` of the operation's activity, kept on the Event
 * (in the annotation queenmq.com/step) so that an attempt after one that lost its worker finds it
 * and does not record the step again (`retried`: the attempt is not the first).
 */
export interface EventStep {
  key: string;
  retried: boolean;
}

const STEP_ANNOTATION = 'queenmq.com/step';
const stepsOf = (e: CoreV1Event) => (e.metadata?.annotations?.[STEP_ANNOTATION] ?? '').split(' ').filter(Boolean);
/**
 * A repeat within this window of the last folds into the same Event; later, it is a new one. Across
 * processes (another replica, this one restarted) the window is a fixed period of this length (with
 * its first minute folding into the period before), as they find each other's Events by name.
 */
export const FOLD_WINDOW_MS = 10 * 60_000;

/** What an Event is about: a QueenCluster, or a QueenBackup. */
export interface EventSubject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; uid?: string };
}

/**
 * An Event on the QueenCluster, so `kubectl describe queencluster` lists the steps. The same
 * reason, message and type on the same object within ten minutes is one Event with a count.
 * Written with one request (a create) in the usual case; no list of the namespace's Events.
 */
export async function recordEvent(
  kube: Kube,
  qc: EventSubject,
  reason: string,
  message: string,
  type: 'Normal' | 'Warning' = 'Normal',
  step?: EventStep,
) {
  const now = new Date();
  const ns = qc.metadata.namespace;
  if (step?.retried) {
    // A step tried again after an attempt that recorded its Event and then lost its worker: once.
    const list = await kube.core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.uid=${qc.metadata.uid},reason=${reason}` });
    if (list.items.some((e) => stepsOf(e).includes(step.key))) return;
  }
  const key = `${qc.metadata.uid}\0${reason}\0${type}\0${message}`;
  for (const [k, v] of recentEvents) if (now.getTime() - v.at > FOLD_WINDOW_MS) recentEvents.delete(k);
  /** One more repeat counted on an Event (remembered for the next); false when it is gone. */
  const countOn = async (folded: Folded) => {
    if (!(await countRepeat(kube, ns, folded, step, now))) return false;
    recentEvents.set(key, folded);
    return true;
  };
  const seen = recentEvents.get(key);
  if (seen && (await countOn(seen))) return;
  // Not written by this process lately. Every replica names the Event of a fold period alike, so
  // another's is found by its name (no list of the namespace's Events): early in a period, the last
  // period's Event takes a repeat that follows it closely; else this period's, created or counted.
  const period = Math.floor(now.getTime() / FOLD_WINDOW_MS);
  if (now.getTime() - period * FOLD_WINDOW_MS < PERIOD_OVERLAP_MS) {
    // (Not readable under a ClusterRole from before Events were read by name: then it is a new one.)
    const last = await readEvent(kube, ns, foldedEventName(qc.metadata.name, key, period - 1)).catch((err: unknown) => {
      if (statusCode(err) === 403) return null;
      throw err;
    });
    if (last && now.getTime() - toMsOr0(last.lastTimestamp) < FOLD_WINDOW_MS && (await countOn(foldedOf(last)))) return;
  }
  const name = foldedEventName(qc.metadata.name, key, period);
  for (let tries = 0; tries < 3; tries++) {
    try {
      const made = await kube.core.createNamespacedEvent({
        namespace: ns,
        body: {
          metadata: { name, namespace: ns, ...(step ? { annotations: { [STEP_ANNOTATION]: step.key } } : {}) },
          involvedObject: {
            apiVersion: qc.apiVersion,
            kind: qc.kind,
            name: qc.metadata.name,
            namespace: ns,
            uid: qc.metadata.uid,
          },
          reason,
          message,
          type,
          source: { component: 'queen-operator' },
          reportingComponent: 'queen-operator',
          reportingInstance: process.env.HOSTNAME ?? 'queen-operator',
          firstTimestamp: now,
          lastTimestamp: now,
          eventTime: undefined,
          count: 1,
        },
      });
      recentEvents.set(key, foldedOf(made));
      return;
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
    // Written already (by another replica, or by this process before it restarted): counted on it.
    const there = await readEvent(kube, ns, name);
    if (there && (await countOn(foldedOf(there)))) return;
  }
  throw new Error(`the Event ${ns}/${name} could neither be created nor counted`);
}

/**
 * Early in a fold period, a repeat of an Event of the last one is counted on it (found by its
 * name), so a repeat a moment after the period turned is not an Event of its own.
 */
export const PERIOD_OVERLAP_MS = 60_000;

/** The Event that folds the repeats of `key` in fold period `period`: a name every replica gives it. */
export function foldedEventName(clusterName: string, key: string, period: number): string {
  return `${clusterName}.${createHash('sha256').update(key).digest('hex').slice(0, 16)}.${period.toString(36)}`;
}

/** An Event as this process last saw it: a repeat is counted on it if it has not changed since (its resourceVersion). */
type Folded = { name: string; count: number; at: number; steps: string[]; resourceVersion: string | undefined };

const foldedOf = (e: CoreV1Event): Folded => ({
  name: e.metadata!.name!,
  count: e.count ?? 1,
  at: toMsOr0(e.lastTimestamp),
  steps: stepsOf(e),
  resourceVersion: e.metadata?.resourceVersion,
});

async function readEvent(kube: Kube, namespace: string, name: string): Promise<CoreV1Event | null> {
  try {
    return await kube.core.readNamespacedEvent({ namespace, name });
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

/**
 * Counts one more repeat on an Event (updating `folded`); false when it is gone (expired). A step
 * the Event records already is not counted again: two attempts of one step can run at once (one
 * that outlived its heartbeat timeout, and the one Temporal started in its place), and the later
 * one may record it first. The count is written only on the Event as `folded` saw it (its
 * resourceVersion): one another process counted since is read again, so no repeat is lost.
 */
async function countRepeat(kube: Kube, namespace: string, folded: Folded, step: EventStep | undefined, now: Date): Promise<boolean> {
  for (let tries = 0; ; tries++) {
    if (step && folded.steps.includes(step.key)) return true;
    const steps = step ? [...folded.steps, step.key].slice(-20) : folded.steps;
    try {
      const counted = await kube.core.patchNamespacedEvent(
        {
          namespace,
          name: folded.name,
          body: {
            count: folded.count + 1,
            lastTimestamp: now,
            metadata: { ...(folded.resourceVersion ? { resourceVersion: folded.resourceVersion } : {}), ...(step ? { annotations: { [STEP_ANNOTATION]: steps.join(' ') } } : {}) },
          },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      Object.assign(folded, foldedOf(counted));
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      if (!isConflict(err) || tries >= 3) throw err;
    }
    // Counted by another process since this one saw it: on the Event as it is now.
    const fresh = await readEvent(kube, namespace, folded.name);
    if (!fresh) return false;
    Object.assign(folded, foldedOf(fresh));
  }
}

const toMsOr0 = (t: Date | string | undefined | null) => toMs(t) ?? 0;
