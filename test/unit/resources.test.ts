// The objects made from a QueenCluster: names, labels, the pod template of seed 001, the peer
// list, and which changes restart pods (the template hash).
import { describe, expect, it } from 'vitest';
import { disruptionBudget, imageTag, networkPolicy, peersFor, podTemplate, services, setOperatorNamespace, specHash, statefulSet } from '../../activities/resources.ts';
import { RESERVED_ENV } from '../../crd/embedded.ts';
import { withDefaults } from '../../crd/defaults.ts';
import type { QueenCluster, QueenClusterSpec } from '../../crd/schema.ts';

function qc(spec: Partial<QueenClusterSpec> = {}): QueenCluster {
  return {
    apiVersion: 'queenmq.com/v1alpha1',
    kind: 'QueenCluster',
    metadata: { name: 'queen', namespace: 'queen', uid: 'uid-1' },
    spec: { version: '2.6.0', secretName: 'queen', ...spec },
  };
}

const container = (c: QueenCluster, pods = 3) => podTemplate(c, pods).template.spec!.containers[0]!;
const env = (c: QueenCluster, pods = 3) => Object.fromEntries(container(c, pods).env!.map((e) => [e.name, e]));

describe('the StatefulSet', () => {
  const sts = statefulSet(qc(), { pods: 3, claimSize: '50Gi' });
  it('restarts nothing by itself and keeps claims when it is deleted', () => {
    expect(sts.spec).toMatchObject({
      replicas: 3,
      serviceName: 'queen-headless',
      podManagementPolicy: 'Parallel',
      minReadySeconds: 30,
      updateStrategy: { type: 'OnDelete' },
      persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Retain', whenScaled: 'Retain' },
    });
    expect(sts.spec!.volumeClaimTemplates![0]).toMatchObject({ metadata: { name: 'data' }, spec: { resources: { requests: { storage: '50Gi' } } } });
    expect(sts.metadata!.ownerReferences).toEqual([
      { apiVersion: 'queenmq.com/v1alpha1', kind: 'QueenCluster', name: 'queen', uid: 'uid-1', controller: true, blockOwnerDeletion: true },
    ]);
  });
  it('runs <image>:<version>, or the image as given when a digest pins it', () => {
    const digest = `sha256:${'0123456789abcdef'.repeat(4)}`;
    expect(container(qc({ image: 'registry.local:5000/queen', version: '2.6.1' })).image).toBe('registry.local:5000/queen:2.6.1');
    expect(container(qc({ image: `ghcr.io/queen-mq/queen@${digest}` })).image).toBe(`ghcr.io/queen-mq/queen@${digest}`);
    expect(container(qc({ image: `ghcr.io/queen-mq/queen:2.6.0@${digest}` })).image).toBe(`ghcr.io/queen-mq/queen:2.6.0@${digest}`);
    expect(imageTag(`ghcr.io/queen-mq/queen:2.6.0@${digest}`)).toBe('2.6.0');
    expect(imageTag(`ghcr.io/queen-mq/queen@${digest}`)).toBeNull();
    expect(imageTag('registry.local:5000/queen')).toBeNull();
    expect(imageTag('registry.local:5000/queen:2.6.1')).toBe('2.6.1');
  });
  it('every variable the operator sets is reserved in the CRD, and only those', () => {
    const all = qc({ proxy: { enabled: true, publicUrl: 'https://q.example.com' }, kafka: { enabled: true }, replicas: 3, upgrade: { finalize: 'Manual' } });
    const set = new Set(Object.keys(env(all)));
    // The Kafka node id is derived at start by the container's command.
    expect(container(all).command?.join(' ')).toContain('QUEEN_KAFKA_NODE_ID');
    set.add('QUEEN_KAFKA_NODE_ID');
    expect([...set].sort()).toEqual([...RESERVED_ENV].sort());
  });
  it('carries the probes, the preStop, the grace period and the security context of seed 001', () => {
    const c = container(qc());
    expect(c.image).toBe('ghcr.io/queen-mq/queen:2.6.0');
    expect(c.startupProbe).toEqual({ tcpSocket: { port: 'http' }, periodSeconds: 5, timeoutSeconds: 5, failureThreshold: 360 });
    expect(c.readinessProbe).toEqual({ httpGet: { path: '/health', port: 'http' }, periodSeconds: 5, timeoutSeconds: 5, failureThreshold: 3 });
    expect(c.livenessProbe).toEqual({ tcpSocket: { port: 'http' }, periodSeconds: 20, timeoutSeconds: 5, failureThreshold: 3 });
    expect(c.lifecycle).toEqual({ preStop: { exec: { command: ['/bin/sleep', '5'] } } });
    expect(c.resources).toEqual({ requests: { cpu: '1', memory: '4Gi' }, limits: { memory: '4Gi' } });
    const pod = podTemplate(qc(), 3).template.spec!;
    expect(pod.terminationGracePeriodSeconds).toBe(90);
    expect(pod.affinity!.podAntiAffinity!.requiredDuringSchedulingIgnoredDuringExecution![0]!.topologyKey).toBe('kubernetes.io/hostname');
    expect(pod.topologySpreadConstraints![0]).toMatchObject({ topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'ScheduleAnyway' });
  });
  it('sets the broker environment in the reference order, spec.env last', () => {
    const names = container(qc({ env: [{ name: 'QUEEN_RAFT_HEARTBEAT_MS', value: '50' }] })).env!.map((e) => e.name);
    expect(names).toEqual([
      'PORT',
      'QUEEN_RAFT_REPLICATOR',
      'QUEEN_RAFT_DIR',
      'QUEEN_RAFT_NODE_ID',
      'QUEEN_RAFT_PEERS',
      'QUEEN_RAFT_TOKEN',
      'QUEEN_ENCRYPTION_KEY',
      'QUEEN_SERVER_ID',
      'QUEEN_LOG_JSON',
      'QUEEN_RAFT_HEARTBEAT_MS',
    ]);
    expect(env(qc()).QUEEN_RAFT_TOKEN!.valueFrom!.secretKeyRef).toEqual({ name: 'queen', key: 'QUEEN_RAFT_TOKEN' });
    expect(env(qc()).QUEEN_ENCRYPTION_KEY!.valueFrom!.secretKeyRef).toEqual({ name: 'queen', key: 'QUEEN_ENCRYPTION_KEY', optional: true });
  });
  it('names every pod in the peer list, node id = ordinal + 1', () => {
    expect(peersFor(qc(), withDefaults(qc().spec), 3)).toBe(
      '1=queen-0.queen-headless.queen.svc.cluster.local:7400/queen-0.queen-headless.queen.svc.cluster.local:6632,' +
        '2=queen-1.queen-headless.queen.svc.cluster.local:7400/queen-1.queen-headless.queen.svc.cluster.local:6632,' +
        '3=queen-2.queen-headless.queen.svc.cluster.local:7400/queen-2.queen-headless.queen.svc.cluster.local:6632',
    );
  });
  it('the proxy needs its session secret; Kafka with several voters derives its node id at start', () => {
    const p = env(qc({ proxy: { enabled: true } }));
    expect(p.QUEEN_PROXY_PORT!.value).toBe('6711');
    expect(p.QUEEN_PROXY_JWT_SECRET!.valueFrom!.secretKeyRef!.optional).toBeUndefined();
    const k = container(qc({ kafka: { enabled: true } }));
    expect(k.command?.slice(0, 2)).toEqual(['/bin/sh', '-c']);
    expect(k.env!.map((e) => e.name)).toContain('QUEEN_TOKEN');
    expect(container(qc({ kafka: { enabled: true }, replicas: 1 })).command).toBeUndefined();
  });
});

describe('which changes restart pods', () => {
  const hash = (spec: Partial<QueenClusterSpec>, pods = 3) => podTemplate(qc(spec), pods).hash;
  it('a new version, resources or env change the template hash', () => {
    expect(hash({ version: '2.6.1' })).not.toBe(hash({}));
    expect(hash({ resources: { requests: { cpu: '2' } } })).not.toBe(hash({}));
    expect(hash({ env: [{ name: 'X', value: '1' }] })).not.toBe(hash({}));
  });
  it('a new digest of the same version changes it: the pods roll', () => {
    const a = hash({ image: `ghcr.io/queen-mq/queen@sha256:${'a'.repeat(64)}` });
    const b = hash({ image: `ghcr.io/queen-mq/queen@sha256:${'b'.repeat(64)}` });
    expect(a).not.toBe(b);
    expect(a).not.toBe(hash({}));
  });
  it('the pod count (the peer list) and the StatefulSet-only fields do not', () => {
    expect(hash({}, 5)).toBe(hash({}, 3));
    expect(hash({ minReadySeconds: 10 })).toBe(hash({}));
    expect(hash({ storage: { size: '100Gi' } })).toBe(hash({}));
  });
  it('the spec hash follows what a rolling operation applies, not the claim size', () => {
    expect(specHash(qc({ minReadySeconds: 10 }))).not.toBe(specHash(qc()));
    expect(specHash(qc({ storage: { size: '100Gi' } }))).toBe(specHash(qc()));
  });
  it('finalize Manual holds the cluster version on the pods until queenmq.com/finalize names the version: one restart each way', () => {
    const manual = qc({ upgrade: { finalize: 'Manual' } });
    expect(env(manual).QUEEN_RAFT_CLUSTER_VERSION_MS).toEqual({ name: 'QUEEN_RAFT_CLUSTER_VERSION_MS', value: '0' });
    expect(env(qc()).QUEEN_RAFT_CLUSTER_VERSION_MS).toBeUndefined();
    // Auto (the default, or said) renders the template of before the field: nothing restarts for it.
    expect(hash({ upgrade: { finalize: 'Auto' } })).toBe(hash({}));
    expect(hash({ upgrade: { finalize: 'Manual' } })).not.toBe(hash({}));
    const finalized = { ...manual, metadata: { ...manual.metadata, annotations: { 'queenmq.com/finalize': '2.6.0' } } };
    expect(env(finalized).QUEEN_RAFT_CLUSTER_VERSION_MS).toBeUndefined();
    expect(podTemplate(finalized, 3).hash).toBe(hash({}));
    const other = { ...manual, metadata: { ...manual.metadata, annotations: { 'queenmq.com/finalize': '2.5.0' } } };
    expect(env(other).QUEEN_RAFT_CLUSTER_VERSION_MS?.value).toBe('0');
  });
  it('the hash is the same however the spec keys are ordered', () => {
    const a = qc({ podLabels: { a: '1', b: '2' } });
    const b = qc({ podLabels: { b: '2', a: '1' } });
    expect(podTemplate(a, 3).hash).toBe(podTemplate(b, 3).hash);
  });
});

describe('the Services and the disruption budget', () => {
  it('the headless Service publishes not-ready pods; the client Service carries only http', () => {
    const [client, headless] = services(qc());
    expect(client!.spec!.ports!.map((p) => p.name)).toEqual(['http']);
    expect(headless!.spec).toMatchObject({ clusterIP: 'None', publishNotReadyAddresses: true });
    expect(headless!.spec!.ports!.map((p) => p.name)).toEqual(['http', 'raft']);
    expect(services(qc({ proxy: { enabled: true } })).map((s) => s.metadata!.name)).toEqual(['queen', 'queen-headless', 'queen-proxy']);
  });
  it('a drain may take one of three or five voters, and none of one (G25)', () => {
    expect(disruptionBudget(qc()).spec!.maxUnavailable).toBe(1);
    expect(disruptionBudget(qc({ replicas: 1 })).spec!.maxUnavailable).toBe(0);
  });
});

describe('the NetworkPolicy (issue 12)', () => {
  it('lets the raft port in from the cluster only, the broker port from it, the operator\'s namespace and labelled clients', () => {
    setOperatorNamespace('queen-system');
    try {
      const np = networkPolicy(qc())!;
      expect(np.metadata).toMatchObject({ name: 'queen', namespace: 'queen', ownerReferences: [{ kind: 'QueenCluster', uid: 'uid-1', controller: true }] });
      const own = { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'queen', 'app.kubernetes.io/instance': 'queen' } } };
      expect(np.spec).toEqual({
        podSelector: own.podSelector,
        policyTypes: ['Ingress'],
        ingress: [
          { from: [own], ports: [{ protocol: 'TCP', port: 7400 }] },
          {
            from: [
              own,
              { namespaceSelector: {}, podSelector: { matchLabels: { 'queenmq.com/client': 'true' } } },
              { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'queen-system' } } },
            ],
            ports: [{ protocol: 'TCP', port: 6632 }],
          },
        ],
      });
      // The proxy and Kafka ports have their own authentication and outside clients: open.
      const open = networkPolicy(qc({ proxy: { enabled: true }, kafka: { enabled: true } }))!.spec.ingress.at(-1);
      expect(open).toEqual({ ports: [{ protocol: 'TCP', port: 6711 }, { protocol: 'TCP', port: 9092 }] });
    } finally {
      setOperatorNamespace(null);
    }
    // Outside a cluster the operator's namespace is not known: no rule for it.
    expect(networkPolicy(qc())!.spec.ingress[1]!.from).toHaveLength(2);
  });

  it('is left out when turned off, and turning it on or off is a change to apply', () => {
    expect(networkPolicy(qc({ networkPolicy: { enabled: false } }))).toBeNull();
    expect(specHash(qc({ networkPolicy: { enabled: false } }))).not.toBe(specHash(qc()));
  });
});
