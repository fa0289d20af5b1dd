// The Kubernetes objects of a QueenCluster, as pure functions of the cluster: the Services, the
// disruption budget and the StatefulSet with its pod template. They are applied with server-side
// apply; the template's hash tells which pods run an old template.
import { createHash } from 'node:crypto';
import type {
  V1Container,
  V1EnvVar,
  V1PersistentVolumeClaim,
  V1PodDisruptionBudget,
  V1PodTemplateSpec,
  V1Service,
  V1StatefulSet,
} from '@kubernetes/client-node';
import { withDefaults } from '../crd/defaults.ts';
import { nodeIdOf } from '../crd/ordinals.ts';
import { holdsClusterVersion } from '../plan/door.ts';
import { ANNOTATIONS, API_VERSION, KIND, type QueenCluster, type StoredSpec } from '../crd/schema.ts';
import { LINK_LABEL, linkEnv, linkPodLabels } from './link-objects.ts';

export const FIELD_MANAGER = 'queen-operator';
export const CONTAINER = 'queen';
export const DATA_DIR = '/var/lib/queen/raft';

/** The names of a cluster's objects, all derived from the QueenCluster's name. */
export const names = {
  statefulSet: (name: string) => name,
  clientService: (name: string) => name,
  headlessService: (name: string) => `${name}-headless`,
  proxyService: (name: string) => `${name}-proxy`,
  disruptionBudget: (name: string) => name,
  networkPolicy: (name: string) => name,
  pod: (name: string, ordinal: number) => `${name}-${ordinal}`,
  claim: (name: string, ordinal: number) => `data-${name}-${ordinal}`,
};

// The ordinals and node ids are part of the API (crd/ordinals.ts); the objects' names are made here.
export { nodeIdOf, ordinalOf, parseOrdinal } from '../crd/ordinals.ts';

/**
 * On every pod: "true" while it takes client connections. The client Services (the broker port,
 * the proxy) select it; the headless Service does not (the raft peers need each other whatever
 * the clients do). The operator sets it to "false" to drain a pod before its node leaves the
 * membership or its pod goes for good (activities/drain.ts), and back to "true" when the pod's
 * node stays. It is left out of the template's hash: setting it on a pod is not a new template.
 */
export const SERVING_LABEL = 'queenmq.com/serving';

export function selectorLabels(name: string): Record<string, string> {
  return { 'app.kubernetes.io/name': 'queen', 'app.kubernetes.io/instance': name };
}

export function objectLabels(name: string, component?: string): Record<string, string> {
  return {
    ...selectorLabels(name),
    'app.kubernetes.io/managed-by': 'queen-operator',
    ...(component ? { 'app.kubernetes.io/component': component } : {}),
  };
}

export function headlessDomain(qc: Pick<QueenCluster, 'metadata'>, spec: StoredSpec): string {
  return `${names.headlessService(qc.metadata.name)}.${qc.metadata.namespace}.svc.${spec.clusterDomain}`;
}

/** The DNS name of a pod through the headless Service. */
export function podHost(qc: Pick<QueenCluster, 'metadata'>, spec: StoredSpec, ordinal: number): string {
  return `${names.pod(qc.metadata.name, ordinal)}.${headlessDomain(qc, spec)}`;
}

/** QUEEN_RAFT_PEERS for a pod count: `id=<raft host:port>/<http host:port>,...`. */
export function peersFor(qc: Pick<QueenCluster, 'metadata'>, spec: StoredSpec, pods: number): string {
  const entries: string[] = [];
  for (let i = 0; i < pods; i++) {
    const host = podHost(qc, spec, i);
    entries.push(`${nodeIdOf(i)}=${host}:${spec.raftPort}/${host}:${spec.port}`);
  }
  return entries.join(',');
}

function ownerReference(qc: QueenCluster) {
  if (!qc.metadata.uid) throw new Error(`QueenCluster ${qc.metadata.namespace}/${qc.metadata.name} has no uid`);
  return { apiVersion: API_VERSION, kind: KIND, name: qc.metadata.name, uid: qc.metadata.uid, controller: true, blockOwnerDeletion: true };
}

/** Canonical JSON: keys sorted, undefined dropped, so equal objects hash equally. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const sorted: Record<string, unknown> = {};
      for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
      return sorted;
    }
    return v;
  });
}

export function shortHash(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex').slice(0, 16);
}

const secretEnv = (secret: string, name: string, optional: boolean): V1EnvVar => ({
  name,
  valueFrom: { secretKeyRef: { name: secret, key: name, ...(optional ? { optional: true } : {}) } },
});

/** Kafka cluster mode: Kafka on and more than one voter. */
export const kafkaClusterMode = (spec: StoredSpec) => spec.kafka.enabled && spec.replicas > 1;

/** The Secret keys a pod of this spec cannot start without. */
export function requiredSecretKeys(spec: StoredSpec): string[] {
  const keys = ['QUEEN_RAFT_TOKEN'];
  if (spec.proxy.enabled) keys.push('QUEEN_PROXY_JWT_SECRET');
  if (kafkaClusterMode(spec)) keys.push('QUEEN_TOKEN');
  return keys;
}

const HOLD_CLUSTER_VERSION: V1EnvVar = { name: 'QUEEN_RAFT_CLUSTER_VERSION_MS', value: '0' };

/** Whether a pod template's broker holds the cluster version (spec.upgrade.finalize Manual, not finalized). */
export function templateHoldsClusterVersion(template: V1PodTemplateSpec | undefined): boolean {
  const env = template?.spec?.containers.find((c) => c.name === CONTAINER)?.env ?? [];
  return env.some((e) => e.name === HOLD_CLUSTER_VERSION.name && e.value === HOLD_CLUSTER_VERSION.value);
}

function brokerEnv(qc: QueenCluster, spec: StoredSpec, pods: number): V1EnvVar[] {
  const env: V1EnvVar[] = [
    { name: 'PORT', value: String(spec.port) },
    { name: 'QUEEN_RAFT_REPLICATOR', value: 'openraft' },
    { name: 'QUEEN_RAFT_DIR', value: DATA_DIR },
    { name: 'QUEEN_RAFT_NODE_ID', value: 'ordinal' },
    { name: 'QUEEN_RAFT_PEERS', value: peersFor(qc, spec, pods) },
    secretEnv(spec.secretName, 'QUEEN_RAFT_TOKEN', false),
    secretEnv(spec.secretName, 'QUEEN_ENCRYPTION_KEY', true),
    { name: 'QUEEN_SERVER_ID', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'QUEEN_LOG_JSON', value: 'true' },
    ...linkEnv(qc, spec),
  ];
  // spec.upgrade.finalize Manual, not finalized yet: the leader never raises the cluster version.
  if (holdsClusterVersion(qc)) env.push({ ...HOLD_CLUSTER_VERSION });
  if (spec.proxy.enabled) {
    env.push(
      { name: 'QUEEN_PROXY_EMBEDDED', value: 'true' },
      { name: 'QUEEN_PROXY_PORT', value: String(spec.proxy.port) },
      { name: 'QUEEN_PROXY_SPOOL_DIR', value: `${DATA_DIR}/proxy-spool` },
      secretEnv(spec.secretName, 'QUEEN_PROXY_JWT_SECRET', false),
      secretEnv(spec.secretName, 'QUEEN_PROXY_CP_TOKEN', true),
      secretEnv(spec.secretName, 'QUEEN_PROXY_BOOTSTRAP_API_KEY', true),
    );
    if (spec.proxy.publicUrl) env.push({ name: 'QUEEN_PROXY_PUBLIC_URL', value: spec.proxy.publicUrl });
  }
  if (spec.kafka.enabled) {
    env.push(
      { name: 'QUEEN_KAFKA_EMBEDDED', value: 'true' },
      { name: 'QUEEN_KAFKA_ADDR', value: `0.0.0.0:${spec.kafka.port}` },
      { name: 'QUEEN_KAFKA_ADVERTISED_ADDR', value: `$(QUEEN_SERVER_ID).${headlessDomain(qc, spec)}:${spec.kafka.port}` },
    );
    if (kafkaClusterMode(spec)) env.push(secretEnv(spec.secretName, 'QUEEN_TOKEN', false));
  }
  for (const extra of spec.env ?? []) env.push(extra as unknown as V1EnvVar);
  return env;
}

/**
 * The broker container's image: <image>:<version>, or the image as given when it is pinned by a
 * digest (<image>@sha256:..., <image>:<version>@sha256:...), which then decides what runs.
 */
export function imageRef(spec: Pick<StoredSpec, 'image' | 'version'>): string {
  return spec.image.includes('@') ? spec.image : `${spec.image}:${spec.version}`;
}

/** The tag of an image reference (before a digest), or null when it has none. */
export function imageTag(image: string): string | null {
  const name = image.split('@')[0]!;
  const colon = name.lastIndexOf(':');
  return colon > name.lastIndexOf('/') ? name.slice(colon + 1) : null;
}

/** In Kafka cluster mode each facade needs QUEEN_KAFKA_NODE_ID = ordinal + 1, derived at start. */
const KAFKA_NODE_ID_SCRIPT =
  'ordinal="${HOSTNAME##*-}"; case "$ordinal" in ""|*[!0-9]*) ' +
  'echo "queen: cannot derive QUEEN_KAFKA_NODE_ID from HOSTNAME=$HOSTNAME" >&2; exit 1;; esac; ' +
  'export QUEEN_KAFKA_NODE_ID=$((ordinal + 1)); exec /app/bin/queen';

function brokerContainer(qc: QueenCluster, spec: StoredSpec, pods: number): V1Container {
  const ports = [
    { name: 'http', containerPort: spec.port },
    { name: 'raft', containerPort: spec.raftPort },
  ];
  if (spec.proxy.enabled) ports.push({ name: 'proxy', containerPort: spec.proxy.port });
  if (spec.kafka.enabled) ports.push({ name: 'kafka', containerPort: spec.kafka.port });
  return {
    name: CONTAINER,
    image: imageRef(spec),
    imagePullPolicy: spec.imagePullPolicy,
    ...(kafkaClusterMode(spec) ? { command: ['/bin/sh', '-c', KAFKA_NODE_ID_SCRIPT] } : {}),
    ports,
    env: brokerEnv(qc, spec, pods),
    resources: (spec.resources as V1Container['resources']) ?? {
      requests: { cpu: '1', memory: '4Gi' },
      limits: { memory: '4Gi' },
    },
    startupProbe: { tcpSocket: { port: 'http' }, periodSeconds: 5, timeoutSeconds: 5, failureThreshold: 360 },
    readinessProbe: { httpGet: { path: '/health', port: 'http' }, periodSeconds: 5, timeoutSeconds: 5, failureThreshold: 3 },
    livenessProbe: { tcpSocket: { port: 'http' }, periodSeconds: 20, timeoutSeconds: 5, failureThreshold: 3 },
    lifecycle: { preStop: { exec: { command: ['/bin/sleep', '5'] } } },
    securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
    volumeMounts: [
      { name: 'data', mountPath: DATA_DIR },
      { name: 'tmp', mountPath: '/tmp' },
    ],
  };
}

/** The pod template with its hash; changing the pod count (the peer list) leaves the hash alone. */
export function podTemplate(qc: QueenCluster, pods: number): { template: V1PodTemplateSpec; hash: string } {
  const spec = withDefaults(qc.spec);
  const name = qc.metadata.name;
  const selector = { matchLabels: selectorLabels(name) };
  const labels = { ...(spec.podLabels ?? {}), ...linkPodLabels(spec), ...selectorLabels(name), [SERVING_LABEL]: 'true' };
  const template: V1PodTemplateSpec = {
    metadata: { labels, annotations: { ...(spec.podAnnotations ?? {}) } },
    spec: {
      terminationGracePeriodSeconds: spec.terminationGracePeriodSeconds,
      automountServiceAccountToken: false,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 65532,
        runAsGroup: 65532,
        fsGroup: 65532,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      affinity: {
        podAntiAffinity:
          spec.podAntiAffinity === 'required'
            ? { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: 'kubernetes.io/hostname', labelSelector: selector }] }
            : {
                preferredDuringSchedulingIgnoredDuringExecution: [
                  { weight: 100, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: selector } },
                ],
              },
      },
      topologySpreadConstraints: [
        { maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: spec.zoneSpread, labelSelector: selector },
      ],
      ...(spec.imagePullSecrets ? { imagePullSecrets: spec.imagePullSecrets } : {}),
      ...(spec.priorityClassName ? { priorityClassName: spec.priorityClassName } : {}),
      ...(spec.nodeSelector ? { nodeSelector: spec.nodeSelector } : {}),
      ...(spec.tolerations ? { tolerations: spec.tolerations as never } : {}),
      containers: [brokerContainer(qc, spec, pods)],
      volumes: [{ name: 'tmp', emptyDir: {} }],
    },
  };
  const hash = templateHash(template);
  template.metadata!.annotations![ANNOTATIONS.configHash] = hash;
  return { template, hash };
}

/**
 * The hash of a template without its hash annotation, without the serving label (the operator
 * sets it on live pods; pods made before it existed run the same template) and with the peer
 * list blanked.
 */
function templateHash(template: V1PodTemplateSpec): string {
  const copy = structuredClone(template);
  delete copy.metadata?.annotations?.[ANNOTATIONS.configHash];
  delete copy.metadata?.labels?.[SERVING_LABEL];
  for (const c of copy.spec?.containers ?? []) {
    for (const e of c.env ?? []) if (e.name === 'QUEEN_RAFT_PEERS') e.value = '';
  }
  return shortHash(copy);
}

export interface StatefulSetShape {
  /** Pods of the StatefulSet: at creation the voters, later whatever the live object has. */
  pods: number;
  /** The claim template's size: a live StatefulSet's cannot be edited, so it is carried over. */
  claimSize: string;
  /**
   * A restore's first boot (spec.bootstrap.fromBackup): QUEEN_RAFT_FORCE_RECOVER=<this node id> on
   * the pods, with one pod, node 1. Left out of the template's hash: the restore removes it (and
   * restarts pod 0 without it) before it ends, and no other operation sees it.
   */
  forceRecover?: number;
}

export const FORCE_RECOVER_ENV = 'QUEEN_RAFT_FORCE_RECOVER';

/** The shape a live StatefulSet keeps when its template is applied again: its pods and claim size. */
export function keptShape(live: V1StatefulSet, spec: StoredSpec): StatefulSetShape {
  return {
    pods: live.spec?.replicas ?? spec.replicas,
    claimSize: (live.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests?.storage as string | undefined) ?? spec.storage.size,
  };
}

export function statefulSet(qc: QueenCluster, shape: StatefulSetShape): V1StatefulSet {
  const spec = withDefaults(qc.spec);
  const name = qc.metadata.name;
  const { template } = podTemplate(qc, shape.pods);
  if (shape.forceRecover !== undefined) template.spec!.containers[0]!.env!.push({ name: FORCE_RECOVER_ENV, value: String(shape.forceRecover) });
  const claim: V1PersistentVolumeClaim = {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name: 'data' },
    spec: {
      accessModes: ['ReadWriteOnce'],
      ...(spec.storage.storageClassName ? { storageClassName: spec.storage.storageClassName } : {}),
      resources: { requests: { storage: shape.claimSize } },
    },
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: {
      name: names.statefulSet(name),
      namespace: qc.metadata.namespace,
      labels: objectLabels(name),
      annotations: { [ANNOTATIONS.specHash]: specHash(qc) },
      ownerReferences: [ownerReference(qc)],
    },
    spec: {
      replicas: shape.pods,
      serviceName: names.headlessService(name),
      podManagementPolicy: 'Parallel',
      minReadySeconds: spec.minReadySeconds,
      updateStrategy: { type: 'OnDelete' },
      persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Retain', whenScaled: 'Retain' },
      selector: { matchLabels: selectorLabels(name) },
      template,
      volumeClaimTemplates: [claim],
    },
  };
}

function service(qc: QueenCluster, svcName: string, component: string, body: V1Service['spec']): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: svcName,
      namespace: qc.metadata.namespace,
      labels: objectLabels(qc.metadata.name, component),
      ownerReferences: [ownerReference(qc)],
    },
    spec: body,
  };
}

export function services(qc: QueenCluster): V1Service[] {
  const spec = withDefaults(qc.spec);
  const name = qc.metadata.name;
  const selector = selectorLabels(name);
  // The Services clients reach select only the pods that serve; the peers' Service selects every pod.
  const serving = { ...selector, [SERVING_LABEL]: 'true' };
  const http = { name: 'http', port: spec.port, targetPort: 'http' as never };
  const kafka = spec.kafka.enabled ? [{ name: 'kafka', port: spec.kafka.port, targetPort: 'kafka' as never }] : [];
  const out = [
    service(qc, names.clientService(name), 'client', { selector: serving, ports: [http, ...kafka] }),
    service(qc, names.headlessService(name), 'peers', {
      clusterIP: 'None',
      publishNotReadyAddresses: true,
      selector,
      ports: [http, { name: 'raft', port: spec.raftPort, targetPort: 'raft' as never }, ...kafka],
    }),
  ];
  if (spec.proxy.enabled) {
    out.push(service(qc, names.proxyService(name), 'proxy', { selector: serving, ports: [{ name: 'proxy', port: spec.proxy.port, targetPort: 'proxy' as never }] }));
  }
  return out;
}

export function disruptionBudget(qc: QueenCluster): V1PodDisruptionBudget {
  const spec = withDefaults(qc.spec);
  const name = qc.metadata.name;
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: {
      name: names.disruptionBudget(name),
      namespace: qc.metadata.namespace,
      labels: objectLabels(name),
      ownerReferences: [ownerReference(qc)],
    },
    // With one voter an eviction would stop the cluster: a drain then waits for a person.
    spec: { maxUnavailable: spec.replicas === 1 ? 0 : 1, selector: { matchLabels: selectorLabels(name) } },
  };
}

/** The namespace the operator runs in, whose pods may reach the broker port (unknown outside a cluster). */
let operatorNamespace: string | null = null;
export function setOperatorNamespace(ns: string | null): void {
  operatorNamespace = ns;
}

/** The label of the pods, in any namespace, that are let through to the broker port. */
export const CLIENT_LABEL = 'queenmq.com/client';

/**
 * The cluster's NetworkPolicy (spec.networkPolicy.enabled, on by default): the raft port from the
 * cluster's own pods only; the broker port from them, from the operator's namespace and from pods
 * labelled queenmq.com/client=true in any namespace; the proxy and Kafka ports, which have their
 * own authentication and clients outside, from anywhere. Null when turned off.
 */
/** A NetworkPolicy as the API takes it (the client's model names `from` `_from`). */
export interface NetworkPolicyObject {
  apiVersion: 'networking.k8s.io/v1';
  kind: 'NetworkPolicy';
  metadata: { name: string; namespace: string; labels: Record<string, string>; ownerReferences: ReturnType<typeof ownerReference>[] };
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: string[];
    ingress: { from?: NetworkPolicyPeer[]; ports: { protocol: string; port: number }[] }[];
  };
}
type NetworkPolicyPeer = { podSelector?: { matchLabels: Record<string, string> }; namespaceSelector?: { matchLabels?: Record<string, string> } };

export function networkPolicy(qc: QueenCluster): NetworkPolicyObject | null {
  const spec = withDefaults(qc.spec);
  if (!spec.networkPolicy.enabled) return null;
  const name = qc.metadata.name;
  const own: NetworkPolicyPeer = { podSelector: { matchLabels: selectorLabels(name) } };
  const brokerFrom: NetworkPolicyPeer[] = [own, { namespaceSelector: {}, podSelector: { matchLabels: { [CLIENT_LABEL]: 'true' } } }];
  if (operatorNamespace) brokerFrom.push({ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': operatorNamespace } } });
  const open = [
    ...(spec.proxy.enabled ? [{ protocol: 'TCP', port: spec.proxy.port }] : []),
    ...(spec.kafka.enabled ? [{ protocol: 'TCP', port: spec.kafka.port }] : []),
  ];
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      name: names.networkPolicy(name),
      namespace: qc.metadata.namespace,
      labels: objectLabels(name),
      ownerReferences: [ownerReference(qc)],
    },
    spec: {
      podSelector: { matchLabels: selectorLabels(name) },
      policyTypes: ['Ingress'],
      ingress: [
        // A source (or a standby, which serves once promoted) lets a standby's pods, in any
        // namespace, reach its raft port: the link token authenticates them.
        { from: spec.link || spec.standby ? [own, { namespaceSelector: {}, podSelector: { matchLabels: { [LINK_LABEL]: 'true' } } }] : [own], ports: [{ protocol: 'TCP', port: spec.raftPort }] },
        { from: brokerFrom, ports: [{ protocol: 'TCP', port: spec.port }] },
        ...(open.length ? [{ ports: open }] : []),
      ],
    },
  };
}

/** The objects applied beside the StatefulSet: the Services, the budget, the NetworkPolicy when on. */
export function clusterObjects(qc: QueenCluster) {
  const policy = networkPolicy(qc);
  return [...services(qc), disruptionBudget(qc), ...(policy ? [policy] : [])];
}

/**
 * The hash of everything rendered from the spec that a rolling operation applies (the pod
 * template, the Services, the budget, the StatefulSet's own settings), except the pod count and
 * the claim size, which have operations of their own.
 */
export function specHash(qc: QueenCluster): string {
  return remembered(qc, 'spec', () => renderedSpecHash(qc));
}

function renderedSpecHash(qc: QueenCluster): string {
  const spec = withDefaults(qc.spec);
  const { hash } = podTemplate(qc, 0);
  const rendered = {
    template: hash,
    services: services(qc).map((s) => s.spec),
    budget: disruptionBudget(qc).spec,
    minReadySeconds: spec.minReadySeconds,
    // Absent when off, so that clusters of before it keep their hash until it is on.
    ...(spec.networkPolicy.enabled ? { networkPolicy: networkPolicy(qc)!.spec } : {}),
  };
  return shortHash(rendered);
}

/** The wanted template hash of the pods, for a cluster as it is specified now. */
export const wantedTemplateHash = (qc: QueenCluster) => remembered(qc, 'template', () => podTemplate(qc, 0).hash);

/**
 * The hashes rendered from one QueenCluster object, kept with it: the observer and the watcher
 * look at the same object (the watches') many times while it does not change, and rendering the
 * pod template to hash it is most of what a look at a resting cluster costs. A changed object is
 * another object (nothing changes one in place).
 */
const hashesOf = new WeakMap<QueenCluster, { spec?: string; template?: string }>();

function remembered(qc: QueenCluster, which: 'spec' | 'template', render: () => string): string {
  let kept = hashesOf.get(qc);
  if (!kept) hashesOf.set(qc, (kept = {}));
  return (kept[which] ??= render());
}
