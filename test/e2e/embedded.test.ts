// e2e `embedded`: the core types the spec embeds (resources, env, tolerations, image pull
// secrets, node selector, labels, annotations, names of Secrets and classes, the image) are refused
// by the API server at `kubectl apply` when a pod would not take them, with the field named, and
// what the API server accepts is what a pod takes. Each case is sent twice: as a QueenCluster
// through kubectl (what a user sees), and as the StatefulSet the operator renders from it (created
// with a server dry run, as the operator would apply it), so a spec the CRD accepts cannot fail
// later at the operator's server-side apply.
import { AppsV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { statefulSet, FIELD_MANAGER } from '../../activities/resources.ts';
import { RESERVED_ENV } from '../../crd/embedded.ts';
import type { QueenCluster } from '../../crd/schema.ts';
import { scenario, testbed, type Scenario } from './harness.ts';

let s: Scenario;
beforeAll(async () => {
  s = await scenario('embedded', { secret: false });
});
afterAll(() => s?.close());

const DIGEST = `sha256:${'0123456789abcdef'.repeat(4)}`;
const spec = (over: Record<string, unknown>) => ({ version: '2.6.0', secretName: 'queen', ...over });

/** `kubectl apply --dry-run=server` of a QueenCluster with this spec: what a user sees. */
function kubectlApply(body: Record<string, unknown>) {
  const manifest = stringify({ apiVersion: 'queenmq.com/v1alpha1', kind: 'QueenCluster', metadata: { name: 'probe', namespace: s.ns }, spec: body });
  return new Promise<{ code: number; out: string }>((resolve) => {
    const p = spawn(testbed().tools.kubectl, [`--kubeconfig=${testbed().kubeconfigPath}`, 'apply', '--dry-run=server', '-f', '-']);
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('close', (code) => resolve({ code: code ?? -1, out }));
    p.stdin.end(manifest);
  });
}

/** The StatefulSet the operator renders from this spec, server-side applied in a dry run: null, or the API server's message. */
async function statefulSetRefusal(body: Record<string, unknown>): Promise<string | null> {
  const qc = { apiVersion: 'queenmq.com/v1alpha1', kind: 'QueenCluster', metadata: { name: 'probe', namespace: s.ns, uid: 'a-uid' }, spec: body } as QueenCluster;
  const sts = statefulSet(qc, { pods: 3, claimSize: '1Gi' });
  try {
    await s.kc.makeApiClient(AppsV1Api).patchNamespacedStatefulSet(
      { namespace: s.ns, name: sts.metadata!.name!, body: sts, fieldManager: FIELD_MANAGER, force: true, dryRun: 'All' },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
    return null;
  } catch (err) {
    const body = (err as { body?: string }).body;
    try {
      return (JSON.parse(body ?? '') as { message: string }).message;
    } catch {
      return String(body ?? err);
    }
  }
}

/** Accepted by the CRD: then a pod takes it too. */
const accepted: [string, Record<string, unknown>][] = [
  ['resources with the standard names, integers and exponents', { resources: { requests: { cpu: 1, memory: '1e9', 'ephemeral-storage': '1Gi' }, limits: { cpu: '2', memory: '2Gi' } } }],
  ['an extended resource asked for as much as its limit', { resources: { requests: { 'example.com/device': '1', cpu: '100m' }, limits: { 'example.com/device': 1 } } }],
  ['hugepages beside memory', { resources: { requests: { 'hugepages-2Mi': '4Mi', memory: '1Gi' }, limits: { 'hugepages-2Mi': '4Mi', memory: '1Gi' } } }],
  [
    'env from a value, a field, a resource, a ConfigMap and a Secret',
    {
      env: [
        { name: 'QUEEN_STMT_TIMEOUT_MS', value: '60000' },
        { name: 'ZONE', valueFrom: { fieldRef: { fieldPath: "metadata.labels['topology.kubernetes.io/zone']" } } },
        { name: 'NODE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'spec.nodeName' } } },
        { name: 'MEMORY', valueFrom: { resourceFieldRef: { resource: 'limits.memory', divisor: '1Mi' } } },
        { name: 'FROM_MAP', valueFrom: { configMapKeyRef: { name: 'settings', key: 'level', optional: true } } },
        { name: 'with space and.dots', valueFrom: { secretKeyRef: { name: 'other', key: 'key.name' } } },
      ],
    },
  ],
  ['tolerations of a key, and of everything', { tolerations: [{ key: 'example.com/dedicated', operator: 'Equal', value: 'queen', effect: 'NoSchedule' }, { operator: 'Exists' }, { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 30 }] }],
  ['labels, annotations and a node selector', { podLabels: { team: 'queue', 'example.com/tier': 'gold' }, podAnnotations: { 'Example.com/Note': 'any text: at all' }, nodeSelector: { 'kubernetes.io/os': 'linux' } }],
  ['a priority class and pull secrets', { priorityClassName: 'system-cluster-critical', imagePullSecrets: [{ name: 'registry' }, { name: 'registry.backup' }] }],
  ['an image on a registry with a port', { image: 'registry.local:5000/team/queen' }],
  ['an image pinned by digest', { image: `ghcr.io/queen-mq/queen@${DIGEST}` }],
  ['an image pinned by digest, with its version as tag', { image: `ghcr.io/queen-mq/queen:2.6.0@${DIGEST}` }],
];

/**
 * Refused by the CRD, naming the field. `pod`: the StatefulSet is refused as well (the CRD says at
 * once what the operator's apply would have said); otherwise why the CRD is stricter than a pod.
 */
const refused: [string, Record<string, unknown>, RegExp, true | string][] = [
  ['a quantity out of the grammar', { resources: { requests: { memory: '4x' } } }, /spec\.resources\.requests\[memory\]: Invalid value: "4x": must be a quantity such as 500m, 4Gi, 4G or 4e9/, true],
  ['a negative quantity', { resources: { limits: { cpu: '-1' } } }, /spec\.resources\.limits\[cpu\]: Invalid value: "-1": must be greater than or equal to 0/, true],
  ['a request above its limit', { resources: { requests: { memory: '3Gi' }, limits: { memory: '2Gi' } } }, /spec\.resources\.requests: Invalid value: a request must be less than or equal to its limit/, true],
  ['a resource a container does not have', { resources: { requests: { storage: '1Gi' } } }, /spec\.resources\.requests: Invalid value: a container resource is cpu, memory, ephemeral-storage/, true],
  ['an extended resource without its limit', { resources: { requests: { 'example.com/device': '1' } } }, /spec\.resources\.requests: Invalid value: a request of hugepages or an extended resource must be equal to its limit/, true],
  ['an extended resource in part', { resources: { requests: { 'example.com/device': '500m' }, limits: { 'example.com/device': '500m' } } }, /an extended resource must be a whole number/, true],
  ['hugepages alone', { resources: { requests: { 'hugepages-2Mi': '2Mi' }, limits: { 'hugepages-2Mi': '2Mi' } } }, /spec\.resources: Invalid value: hugepages require cpu or memory/, true],
  ['a quantity with a fraction as a number', { resources: { requests: { cpu: 0.5 } } }, /spec\.resources\.requests\.cpu: Invalid value: "number": spec\.resources\.requests\.cpu in body must be of type integer,string/, 'a CRD schema takes an integer or a string, not a fraction: write "0.5" or 500m'],
  ['an env name with =', { env: [{ name: 'A=B', value: 'x' }] }, /spec\.env\[0\]\.name: Invalid value: an environment variable's name is printable ASCII characters other than '='/, true],
  ...RESERVED_ENV.filter((n) => n.startsWith('QUEEN_RAFT_') || n === 'PORT').map(
    (name) =>
      [
        `the operator's own ${name}`,
        { env: [{ name, value: 'x' }] },
        new RegExp(`spec\\.env\\[0\\]\\.name: Invalid value: ${name} is set by the operator and cannot be set in env`),
        'the operator sets it: the pod would take the entry and replace the value the cluster depends on',
      ] as [string, Record<string, unknown>, RegExp, string],
  ),
  ['an env name given twice', { env: [{ name: 'A', value: 'x' }, { name: 'A', value: 'y' }] }, /spec\.env\[1\]: Duplicate value: \{"name":"A"\}/, true],
  ['an env value and a source', { env: [{ name: 'A', value: 'x', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }] }, /spec\.env\[0\]\.valueFrom: Invalid value: may not be specified when `value` is not empty/, true],
  ['an env source that names nothing', { env: [{ name: 'A', valueFrom: {} }] }, /spec\.env\[0\]\.valueFrom: Invalid value: must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`/, true],
  ['an env source that names two', { env: [{ name: 'A', valueFrom: { fieldRef: { fieldPath: 'metadata.name' }, secretKeyRef: { name: 's', key: 'k' } } }] }, /spec\.env\[0\]\.valueFrom: Invalid value: must specify one of/, true],
  ['a field a pod does not have', { env: [{ name: 'A', valueFrom: { fieldRef: { fieldPath: 'spec.foo' } } }] }, /spec\.env\[0\]\.valueFrom\.fieldRef\.fieldPath: Invalid value: "spec\.foo": supported values: metadata\.name/, true],
  ['a resource a container does not expose', { env: [{ name: 'A', valueFrom: { resourceFieldRef: { resource: 'limits.foo' } } }] }, /spec\.env\[0\]\.valueFrom\.resourceFieldRef\.resource: Invalid value: "limits\.foo": supported values/, true],
  ['a divisor cpu does not take', { env: [{ name: 'A', valueFrom: { resourceFieldRef: { resource: 'limits.cpu', divisor: '1Mi' } } }] }, /spec\.env\[0\]\.valueFrom\.resourceFieldRef\.divisor: Invalid value: a divisor is 1m or 1 for cpu/, true],
  ['a Secret reference without a name', { env: [{ name: 'A', valueFrom: { secretKeyRef: { key: 'k' } } }] }, /spec\.env\[0\]\.valueFrom\.secretKeyRef\.name: Required value/, true],
  ['a Secret key with a slash', { env: [{ name: 'A', valueFrom: { secretKeyRef: { name: 's', key: 'a/b' } } }] }, /spec\.env\[0\]\.valueFrom\.secretKeyRef\.key: Invalid value: "a\/b": a key is letters, digits/, true],
  ['a ConfigMap name in capitals', { env: [{ name: 'A', valueFrom: { configMapKeyRef: { name: 'Settings', key: 'k' } } }] }, /spec\.env\[0\]\.valueFrom\.configMapKeyRef\.name: Invalid value: "Settings": a ConfigMap name is a DNS subdomain/, true],
  ['a toleration of no key that is not Exists', { tolerations: [{ operator: 'Equal', value: 'x' }] }, /spec\.tolerations\[0\]\.operator: Invalid value: operator must be Exists when `key` is empty/, true],
  ['tolerationSeconds without NoExecute', { tolerations: [{ key: 'a', operator: 'Exists', effect: 'NoSchedule', tolerationSeconds: 5 }] }, /spec\.tolerations\[0\]\.effect: Invalid value: effect must be 'NoExecute' when `tolerationSeconds` is set/, true],
  ['an operator a toleration does not have', { tolerations: [{ key: 'a', operator: 'In' }] }, /spec\.tolerations\[0\]\.operator: Unsupported value: "In": supported values: "Equal", "Exists"/, true],
  ['an effect a taint does not have', { tolerations: [{ key: 'a', operator: 'Exists', effect: 'Never' }] }, /spec\.tolerations\[0\]\.effect: Unsupported value: "Never"/, true],
  ['a value with Exists', { tolerations: [{ key: 'a', operator: 'Exists', value: 'x' }] }, /spec\.tolerations\[0\]\.value: Invalid value: value must be empty when `operator` is 'Exists'/, true],
  ['a toleration value with a space', { tolerations: [{ key: 'a', value: 'x y' }] }, /spec\.tolerations\[0\]\.value: Invalid value: a toleration's value is empty, or at most 63 letters/, true],
  ['a taint key with a space', { tolerations: [{ key: 'a b', operator: 'Exists' }] }, /spec\.tolerations\[0\]\.key: Invalid value: "a b": a taint key is a name of letters/, true],
  ['a node selector key with a space', { nodeSelector: { 'a b': 'c' } }, /spec\.nodeSelector: Invalid value: a label key is a name of letters/, true],
  ['a node selector value with a space', { nodeSelector: { a: 'c d' } }, /spec\.nodeSelector\[a\]: Invalid value: "c d": a label value is empty/, true],
  ['a pod label value that starts with -', { podLabels: { a: '-x' } }, /spec\.podLabels\[a\]: Invalid value: "-x": a label value is empty/, true],
  ['a pod annotation key with a space', { podAnnotations: { 'a b': 'x' } }, /spec\.podAnnotations: Invalid value: an annotation key is a name of letters/, true],
  ['a priority class name with _', { priorityClassName: 'Bad_Name' }, /spec\.priorityClassName: Invalid value: "Bad_Name": a PriorityClass name is a DNS subdomain/, true],
  ['a secretName in capitals', { secretName: 'Queen' }, /spec\.secretName: Invalid value: "Queen": a Secret name is a DNS subdomain/, true],
  ['a storage class name with _', { storage: { size: '1Gi', storageClassName: 'fast_ssd' } }, /spec\.storage\.storageClassName: Invalid value: "fast_ssd": a StorageClass name is a DNS subdomain/, true],
  ['a pull secret name with a space', { imagePullSecrets: [{ name: 'my registry' }] }, /spec\.imagePullSecrets\[0\]\.name: Invalid value: "my registry": a Secret name is a DNS subdomain/, 'no Secret has such a name: the kubelet would look for it at every pull'],
  ['a cluster domain with a space', { clusterDomain: 'cluster local' }, /spec\.clusterDomain: Invalid value: "cluster local": a cluster domain is a DNS subdomain/, 'it goes into the peer addresses, which no resolver answers'],
  ['an image with a tag', { image: 'ghcr.io/queen-mq/queen:2.6.0' }, /spec\.image: Invalid value: "ghcr\.io\/queen-mq\/queen:2\.6\.0": must be an image repository such as ghcr\.io\/queen-mq\/queen \(the tag is spec\.version\)/, 'the version is the tag: ghcr.io/queen-mq/queen:2.6.0:2.6.0 is no image'],
  ['an image in capitals', { image: 'ghcr.io/Queen' }, /spec\.image: Invalid value: "ghcr\.io\/Queen": must be an image repository/, 'a runtime refuses the name (InvalidImageName) only once the pod starts'],
  ['an image pinned to another version', { image: `ghcr.io/queen-mq/queen:2.6.1@${DIGEST}` }, /spec\.image: Invalid value: the tag in image, before its digest, must be spec\.version/, 'the status would show a version the pods do not run'],
  ['a short digest', { image: 'ghcr.io/queen-mq/queen@sha256:0123' }, /spec\.image: Invalid value: "ghcr\.io\/queen-mq\/queen@sha256:0123": must be an image repository/, 'a runtime cannot pull it: the pods would fail as they start'],
];

describe('what the API server accepts, a pod takes', () => {
  it.each(accepted)('%s', async (_name, over) => {
    const body = spec(over);
    const r = await kubectlApply(body);
    expect(r.out).toMatch(/queencluster\.queenmq\.com\/probe created \(server dry run\)/);
    expect(r.code).toBe(0);
    expect(await statefulSetRefusal(body)).toBeNull();
  });
});

describe('what a pod would not take is refused at kubectl apply, naming the field', () => {
  it.each(refused)('%s', async (_name, over, message, pod) => {
    const body = spec(over);
    const r = await kubectlApply(body);
    expect(r.code).not.toBe(0);
    expect(r.out).toMatch(message);
    const later = await statefulSetRefusal(body);
    if (pod === true) expect(later, 'the StatefulSet would have been refused too').not.toBeNull();
  });
});
