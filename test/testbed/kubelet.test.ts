// The kubelet stand-in does what a kubelet does, seen as a user sees it (pod status, Events,
// EndpointSlices, DNS) and from inside the container (its environment, its volume). The
// containers are the test bed's stand-in process (image *testbed-stand-in*), an HTTP server on
// the pod address.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { getJson, sendJson, until } from './checks.ts';
import { connect } from './client.ts';

const client = connect();
const f = client.info.timeFactor;
let ns = '';

beforeAll(async () => {
  ns = await client.newNamespace('kubelet');
});
afterAll(async () => {
  if (ns) await client.deleteNamespace(ns);
});

const podPath = (name: string) => `/api/v1/namespaces/${ns}/pods/${name}`;
const getPod = (name: string) => client.kube().get<any>(podPath(name));
const ready = (p: any) => p.status?.conditions?.find((c: any) => c.type === 'Ready')?.status === 'True';
const apply = async (yaml: string) => {
  const r = await client.applyManifest(yaml, ns);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
};
const running = (name: string) => until(`pod ${name} Running with an address`, async () => {
  const p = await getPod(name);
  return p.status?.phase === 'Running' && p.status.podIP && p.status.containerStatuses?.[0]?.state?.running ? p : undefined;
}, 30_000);
const standIn = (ip: string, path: string) => getJson(`http://${ip}:8080${path}`);
// Running means the process started; it serves a moment later (as with any container).
const serving = (ip: string) => until(`the stand-in at ${ip} serving`, async () => (await standIn(ip, '/health')).status === 200, 30_000, 50);

it('resolves the container environment as Kubernetes does', async () => {
  await apply(`
apiVersion: v1
kind: Secret
metadata: { name: creds }
stringData: { token: s3cret }
---
apiVersion: v1
kind: Service
metadata: { name: web-front }
spec:
  selector: { app: nothing }
  ports: [{ name: http, port: 80, targetPort: 8080 }]
`);
  await apply(`
apiVersion: v1
kind: Pod
metadata: { name: envtest, labels: { app: envapp } }
spec:
  containers:
    - name: main
      image: example.org/testbed-stand-in:1
      env:
        - { name: PORT, value: "8080" }
        - { name: PLAIN, value: v1 }
        - { name: FROM_SECRET, valueFrom: { secretKeyRef: { name: creds, key: token } } }
        - { name: OPTIONAL_MISSING, valueFrom: { secretKeyRef: { name: nope, key: x, optional: true } } }
        - { name: POD_NAME, valueFrom: { fieldRef: { fieldPath: metadata.name } } }
        - { name: POD_NS, valueFrom: { fieldRef: { fieldPath: metadata.namespace } } }
        - { name: POD_UID, valueFrom: { fieldRef: { fieldPath: metadata.uid } } }
        - { name: APP, valueFrom: { fieldRef: { fieldPath: "metadata.labels['app']" } } }
        - { name: POD_IP, valueFrom: { fieldRef: { fieldPath: status.podIP } } }
        - { name: NODE, valueFrom: { fieldRef: { fieldPath: spec.nodeName } } }
        - { name: COMBINED, value: "$(POD_NAME).$(POD_NS):$(PLAIN)" }
        - { name: ESCAPED, value: "$$(POD_NAME)" }
        - { name: LATER_REF, value: "$(DEFINED_LATER)" }
        - { name: DEFINED_LATER, value: x }
        - { name: FROM_SERVICE, value: "$(WEB_FRONT_SERVICE_HOST)" }
`);
  const pod = await running('envtest');
  await serving(pod.status.podIP);
  const env = (await standIn(pod.status.podIP, '/env')).body;
  expect(env.PLAIN).toBe('v1');
  expect(env.FROM_SECRET).toBe('s3cret');
  expect(env).not.toHaveProperty('OPTIONAL_MISSING');
  expect(env.POD_NAME).toBe('envtest');
  expect(env.POD_NS).toBe(ns);
  expect(env.POD_UID).toBe(pod.metadata.uid);
  expect(env.APP).toBe('envapp');
  expect(env.POD_IP).toBe(pod.status.podIP);
  expect(env.NODE).toBe(pod.spec.nodeName);
  expect(env.COMBINED).toBe(`envtest.${ns}:v1`);
  expect(env.ESCAPED).toBe('$(POD_NAME)');
  expect(env.LATER_REF).toBe('$(DEFINED_LATER)');
  expect(env.HOSTNAME).toBe('envtest');
  const svc = await client.kube().get<any>(`/api/v1/namespaces/${ns}/services/web-front`);
  expect(env.FROM_SERVICE).toBe(svc.spec.clusterIP);
  expect(env.WEB_FRONT_PORT).toBe(`tcp://${svc.spec.clusterIP}:80`);
  expect(env.KUBERNETES_SERVICE_HOST).toBeTruthy();
  expect(env.QUEEN_SIM_IP).toBe(pod.status.podIP);
});

it('a missing Secret or key keeps the container waiting with CreateContainerConfigError until it exists', async () => {
  await apply(`
apiVersion: v1
kind: Pod
metadata: { name: needs-secret }
spec:
  containers:
    - name: main
      image: example.org/testbed-stand-in:1
      env:
        - { name: PORT, value: "8080" }
        - { name: TOKEN, valueFrom: { secretKeyRef: { name: later, key: token } } }
`);
  const waiting = await until('CreateContainerConfigError', async () => {
    const p = await getPod('needs-secret');
    const w = p.status?.containerStatuses?.[0]?.state?.waiting;
    return w?.reason === 'CreateContainerConfigError' ? p : undefined;
  }, 30_000);
  expect(waiting.status.phase).toBe('Pending');
  expect(waiting.status.containerStatuses[0].state.waiting.message).toBe('secret "later" not found');

  await apply(`
apiVersion: v1
kind: Secret
metadata: { name: later }
stringData: { other: x }
`);
  await until('the missing key reported', async () => {
    const p = await getPod('needs-secret');
    return p.status?.containerStatuses?.[0]?.state?.waiting?.message === `couldn't find key token in Secret ${ns}/later` || undefined;
  }, 30_000);

  await apply(`
apiVersion: v1
kind: Secret
metadata: { name: later }
stringData: { other: x, token: finally }
`);
  const pod = await running('needs-secret');
  await serving(pod.status.podIP);
  expect((await standIn(pod.status.podIP, '/env')).body.TOKEN).toBe('finally');
  const events = await client.kube().get<any>(`/api/v1/namespaces/${ns}/events`, { query: { fieldSelector: 'involvedObject.name=needs-secret' } });
  expect(events.items.map((e: any) => e.message)).toContain('Error: secret "later" not found');
});

it('readiness follows the probe, and the Service endpoints and DNS follow readiness', async () => {
  await apply(`
apiVersion: v1
kind: Service
metadata: { name: probed }
spec:
  clusterIP: None
  selector: { app: probed }
  ports: [{ name: http, port: 8080 }]
---
apiVersion: v1
kind: Pod
metadata: { name: probed, labels: { app: probed } }
spec:
  hostname: probed
  subdomain: probed
  containers:
    - name: main
      image: example.org/testbed-stand-in:1
      env: [{ name: PORT, value: "8080" }]
      ports: [{ name: http, containerPort: 8080 }]
      readinessProbe: { httpGet: { path: /health, port: http }, periodSeconds: 1, failureThreshold: 2 }
`);
  const pod = await running('probed');
  const ip = pod.status.podIP;
  await until('Ready', async () => ready(await getPod('probed')), 30_000);
  const fqdn = `probed.probed.${ns}.svc.cluster.local`;
  await until('DNS answers the ready pod', async () => (await client.control.dns(fqdn)).ips[0] === ip, 30_000);

  await sendJson('POST', `http://${ip}:8080/health?status=503`, {});
  const notReady = await until('not Ready', async () => {
    const p = await getPod('probed');
    return ready(p) ? undefined : p;
  }, 30_000);
  expect(notReady.status.phase).toBe('Running');
  expect(notReady.status.conditions.find((c: any) => c.type === 'Ready').reason).toBe('ContainersNotReady');
  await until('the endpoint marked not ready', async () => {
    const slices = await client.kube().get<any>(`/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`, { query: { labelSelector: 'kubernetes.io/service-name=probed' } });
    const ep = slices.items.flatMap((s: any) => s.endpoints ?? []).find((e: any) => e.addresses.includes(ip));
    return ep?.conditions?.ready === false || undefined;
  }, 30_000);
  // The test bed's DNS follows the EndpointSlices through its own informer, a moment behind.
  await until('DNS drops the not-ready pod', async () => (await client.control.dns(fqdn)).rcode === 'NXDOMAIN' || undefined, 30_000);

  await sendJson('POST', `http://${ip}:8080/health?status=200`, {});
  await until('Ready again', async () => ready(await getPod('probed')), 30_000);
  await until('DNS answers again', async () => (await client.control.dns(fqdn)).ips[0] === ip, 30_000);
});

it('an exit with code 75 restarts the container in place, on the same volume and address', async () => {
  await apply(`
apiVersion: v1
kind: PersistentVolumeClaim
metadata: { name: data-restarts }
spec:
  accessModes: [ReadWriteOnce]
  resources: { requests: { storage: 1Gi } }
---
apiVersion: v1
kind: Pod
metadata: { name: restarts }
spec:
  containers:
    - name: main
      image: example.org/testbed-stand-in:1
      env: [{ name: PORT, value: "8080" }]
      volumeMounts: [{ name: data, mountPath: /data }]
  volumes: [{ name: data, persistentVolumeClaim: { claimName: data-restarts } }]
`);
  const pod = await running('restarts');
  const ip = pod.status.podIP;
  await serving(ip);
  expect((await standIn(ip, '/starts')).body.starts).toBe(1);
  await sendJson('POST', `http://${ip}:8080/exit?code=75`, {});
  const after = await until('restarted once', async () => {
    const p = await getPod('restarts');
    const cs = p.status?.containerStatuses?.[0];
    return cs?.restartCount === 1 && cs.state.running ? p : undefined;
  }, 30_000);
  const cs = after.status.containerStatuses[0];
  expect(cs.lastState.terminated.exitCode).toBe(75);
  expect(cs.lastState.terminated.reason).toBe('Error');
  expect(after.metadata.uid).toBe(pod.metadata.uid);
  expect(after.status.podIP).toBe(ip);
  await until('serving again', async () => (await standIn(ip, '/starts')).body.starts === 2, 30_000);
  const info = await client.control.pod(ns, 'restarts');
  expect(info.restarts).toBe(1);
  expect(info.lastExitCode).toBe(75);

  // kubectl logs reads through the API server from the node's kubelet API: this run, and --previous.
  const logs = await client.kubectl(['-n', ns, 'logs', 'restarts']);
  expect(logs.stderr).toBe('');
  expect(logs.stdout).toBe(`stand-in listening on ${ip}:8080\n`);
  const previous = await client.kubectl(['-n', ns, 'logs', 'restarts', '--previous']);
  expect(previous.stdout).toBe(`stand-in listening on ${ip}:8080\n`);
});

it('a liveness failure restarts the container; quick crashes back off (CrashLoopBackOff)', async () => {
  await apply(`
apiVersion: v1
kind: Pod
metadata: { name: lively }
spec:
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: example.org/testbed-stand-in:1
      env: [{ name: PORT, value: "8080" }]
      livenessProbe: { httpGet: { path: /health, port: 8080 }, initialDelaySeconds: 15, periodSeconds: 1, failureThreshold: 2 }
`);
  const pod = await running('lively');
  const ip = pod.status.podIP;
  await serving(ip);
  await sendJson('POST', `http://${ip}:8080/health?status=500`, {});
  await until('restarted after the liveness failures', async () => {
    const p = await getPod('lively');
    const cs = p.status?.containerStatuses?.[0];
    return cs?.restartCount === 1 && cs.state.running ? p : undefined;
  }, 30_000);
  await until('the liveness Event', async () => {
    const events = await client.kube().get<any>(`/api/v1/namespaces/${ns}/events`, { query: { fieldSelector: 'involvedObject.name=lively' } });
    return events.items.some((e: any) => e.message === 'Container main failed liveness probe, will be restarted') || undefined;
  }, 30_000);

  // Crash at once after that restart: the kubelet waits (10 s, doubling; × the time factor).
  await serving(ip);
  await sendJson('POST', `http://${ip}:8080/exit?code=1`, {});
  const backoff = await until('CrashLoopBackOff', async () => {
    const p = await getPod('lively');
    const w = p.status?.containerStatuses?.[0]?.state?.waiting;
    return w?.reason === 'CrashLoopBackOff' ? p : undefined;
  }, 10_000, 50);
  const cs = backoff.status.containerStatuses[0];
  expect(cs.state.waiting.message).toBe(`back-off 10s restarting failed container=main pod=lively_${ns}(${pod.metadata.uid})`);
  expect(cs.lastState.terminated.exitCode).toBe(1);
  const after = await until('restarted after the back-off', async () => {
    const p = await getPod('lively');
    const c = p.status?.containerStatuses?.[0];
    return c?.restartCount === 2 && c.state.running ? p : undefined;
  }, 30_000);
  expect(after.status.phase).toBe('Running');
});

/** A pod whose process ignores SIGTERM, with a preStop of 5 s and the grace period given (both × the time factor), running. */
async function slowToStop(name: string, graceSeconds: number) {
  await apply(`
apiVersion: v1
kind: Pod
metadata: { name: ${name} }
spec:
  terminationGracePeriodSeconds: ${graceSeconds}
  containers:
    - name: main
      image: example.org/testbed-stand-in:1
      env: [{ name: PORT, value: "8080" }, { name: STANDIN_IGNORE_TERM, value: "1" }]
      lifecycle: { preStop: { exec: { command: ["/bin/sleep", "5"] } } }
`);
  await running(name);
  return client.control.pod(ns, name);
}

it('deletion runs preStop, sends SIGTERM, waits the grace period, then kills and removes the pod', async () => {
  const info = await slowToStop('stubborn', 10);
  const began = Date.now();
  expect((await client.kubectl(['-n', ns, 'delete', 'pod', 'stubborn', '--wait=false'])).code).toBe(0);
  const terminating = await getPod('stubborn');
  expect(terminating.metadata.deletionTimestamp).toBeTruthy();
  await until('the pod gone', async () => (await client.kube().getOrNull(podPath('stubborn'))) === null, 60_000, 50);
  const tookMs = Date.now() - began;
  // The whole grace period: preStop (5 s) then SIGTERM, ignored, then SIGKILL at 10 s.
  expect(tookMs).toBeGreaterThanOrEqual(10_000 * f - 200);
  expect(tookMs).toBeLessThan(10_000 * f + 5000);
  const log = readFileSync(info.logPath, 'utf8');
  expect(log).toContain('stand-in: SIGTERM');
  expect(log).toMatch(/exited with code 137/);
  console.log(`deletion with a 10 s grace period (× ${f}) took ${(tookMs / 1000).toFixed(1)} s`);
});

/** slowToStop() with a grace period of 120 s, deleted: once the kubelet has begun stopping it (its preStop runs). */
async function terminatingSlowly(name: string) {
  const info = await slowToStop(name, 120);
  expect((await client.kubectl(['-n', ns, 'delete', 'pod', name, '--wait=false'])).code).toBe(0);
  await until('the kubelet stopping the pod', async () => {
    const events = await client.kube().get<any>(`/api/v1/namespaces/${ns}/events?fieldSelector=involvedObject.name=${name},reason=Killing`);
    return events.items.length > 0;
  }, 30_000, 50);
  return info;
}

it('a second delete with a shorter grace period stops a pod already terminating on that one, as a kubelet does', async () => {
  const info = await terminatingSlowly('hasty');
  const began = Date.now();
  expect((await client.kubectl(['-n', ns, 'delete', 'pod', 'hasty', '--grace-period=1', '--wait=false'])).code).toBe(0);
  // The API server shortened it.
  expect((await getPod('hasty')).metadata.deletionGracePeriodSeconds).toBe(1);
  await until('the pod gone', async () => (await client.kube().getOrNull(podPath('hasty'))) === null, 150_000 * f + 30_000, 50);
  const tookMs = Date.now() - began;
  // From the second delete: its 1 s (the preStop cut short), SIGTERM, ignored, then SIGKILL after
  // the kubelet's 2 s minimum; nowhere near the 120 s of the first.
  expect(tookMs).toBeLessThan((1 + 2) * 1000 * f + 5000);
  const log = readFileSync(info.logPath, 'utf8');
  expect(log).toContain('stand-in: SIGTERM');
  expect(log).toMatch(/exited with code 137/);
  console.log(`a 120 s grace period shortened to 1 s (× ${f}) ended the pod ${(tookMs / 1000).toFixed(1)} s after the second delete`);
});

it('a pod already terminating and then deleted by force is stopped at once', async () => {
  const info = await terminatingSlowly('forced');
  const began = Date.now();
  expect((await client.kubectl(['-n', ns, 'delete', 'pod', 'forced', '--grace-period=0', '--force'])).code).toBe(0);
  expect(await client.kube().getOrNull(podPath('forced'))).toBeNull();
  // The object is gone at once; the process is killed (SIGTERM ignored, SIGKILL after the 2 s minimum), not left for 120 s.
  await until('the process killed', async () => /exited with code 137/.test(readFileSync(info.logPath, 'utf8')), 150_000 * f + 30_000, 50);
  const tookMs = Date.now() - began;
  expect(tookMs).toBeLessThan(2 * 1000 * f + 5000);
  console.log(`a pod terminating on 120 s (× ${f}) deleted by force: its process killed ${(tookMs / 1000).toFixed(1)} s later`);
});
