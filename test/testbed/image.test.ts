// The operator's image as the test bed runs it: built from the Dockerfile with the files
// .dockerignore lets in and nothing else, and run in a pod as a container runtime would: the
// image's files read-only at /app, as uid 65532, only the pod's volumes writable, the cluster DNS
// with the pod's search path as its resolver, the ServiceAccount's files where client libraries
// look, its own host name. The pod overrides the command to look around from inside.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { until } from './checks.ts';
import { connect } from './client.ts';
import { buildOperatorImage, contextFiles, imageFiles, operatorImageName } from './image.ts';

const client = connect();
let ns = '';
beforeAll(async () => {
  ns = await client.newNamespace('image');
});
afterAll(async () => {
  if (ns) await client.deleteNamespace(ns);
});

it('holds the files .dockerignore lets in, the production packages and the workflow bundle, and nothing else', async () => {
  const image = await buildOperatorImage();
  const files = imageFiles(image);
  const own = files.filter((f) => !f.startsWith('node_modules/'));
  expect(own).toEqual([...contextFiles(), 'workflow-bundle.js'].sort());
  expect(own).toContain('main.ts');
  expect(own.some((f) => f.startsWith('test/'))).toBe(false);
  // Production packages only: no test runner, no type checker, no Node.js package.
  for (const dev of ['vitest', 'typescript', 'node']) expect(files.some((f) => f.startsWith(`node_modules/${dev}/`))).toBe(false);
  // Nor the compiler that bundled the workflows: the image runs the bundle.
  for (const tool of ['@swc/', 'swc-loader/']) expect(files.some((f) => f.startsWith(`node_modules/${tool}`))).toBe(false);
  expect(files.some((f) => f.startsWith('node_modules/@temporalio/worker/'))).toBe(true);
  expect(image.user).toEqual({ uid: 65532, gid: 65532 });
  expect(image.entrypoint).toEqual(['/nodejs/bin/node', '--max-semi-space-size=8', '--expose-gc', 'main.ts']);
});

const LOOK = `
const fs = require('fs'), os = require('os');
const tryWrite = (p) => { try { fs.writeFileSync(p, 'x'); return 'written'; } catch (e) { return e.code; } };
console.log(JSON.stringify({
  uid: process.getuid(), cwd: process.cwd(), host: os.hostname(), root: fs.readdirSync('/').sort(),
  app: tryWrite('/app/x'), slash: tryWrite('/x'), tmp: tryWrite('/tmp/x'),
  resolv: fs.readFileSync('/etc/resolv.conf', 'utf8'),
  sa: fs.readdirSync('/var/run/secrets/kubernetes.io/serviceaccount').sort(),
  kube: process.env.KUBERNETES_SERVICE_HOST + ':' + process.env.KUBERNETES_SERVICE_PORT,
  bundle: process.env.QUEEN_WORKFLOW_BUNDLE, checkout: fs.existsSync('/work') || fs.existsSync('/root'),
}));
require('dns').lookup('kubernetes.default.svc.cluster.local', (err, address) => { console.log('dns ' + (err ? err.code : address)); setInterval(() => {}, 1000); });
`;

it('runs as a container: read-only image files, uid 65532, writable volumes only, cluster DNS, in-cluster account', async () => {
  const r = await client.applyManifest(
    `
apiVersion: v1
kind: Pod
metadata: { name: look }
spec:
  securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532 }
  containers:
    - name: operator
      image: ${operatorImageName()}
      command: ["/nodejs/bin/node", "-e", ${JSON.stringify(LOOK)}]
      securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false }
      volumeMounts: [{ name: tmp, mountPath: /tmp }]
  volumes: [{ name: tmp, emptyDir: {} }]
`,
    ns,
  );
  expect(r.stderr).toBe('');
  const out = await until('the container looked around', async () => {
    const logs = await client.kubectl(['-n', ns, 'logs', 'look']);
    return /^dns /m.test(logs.stdout) ? logs.stdout : undefined;
  }, 120_000);
  const seen = JSON.parse(out.split('\n').find((l) => l.startsWith('{'))!);
  expect(seen.uid).toBe(65532);
  expect(seen.cwd).toBe('/app');
  expect(seen.host).toBe('look');
  expect(seen.app).toBe('EROFS');
  expect(seen.slash).toBe('EROFS');
  expect(seen.tmp).toBe('written');
  expect(seen.checkout).toBe(false);
  expect(seen.bundle).toBe('/app/workflow-bundle.js');
  expect(seen.sa).toEqual(['ca.crt', 'namespace', 'token']);
  expect(seen.kube).toBe(client.info.apiServer.replace(/^https:\/\//, ''));
  if (client.info.podNameserver) {
    expect(seen.resolv).toContain(`nameserver ${client.info.podNameserver}`);
    expect(seen.resolv).toContain(`search ${ns}.svc.cluster.local svc.cluster.local cluster.local`);
    expect(seen.resolv).toContain('options ndots:5');
    // The kubernetes Service has a cluster IP: the DNS answers it, through the search path too.
    expect(out).toMatch(/^dns 10\.96\.0\.1$/m);
  }
});

it("pulls the operator's image only under the chart's name: another tag or registry is not found, as on a cluster", async () => {
  expect(operatorImageName()).toBe('ghcr.io/queen-mq/queen-operator:0.1.0');
  for (const [pod, image] of [
    ['other-tag', 'ghcr.io/queen-mq/queen-operator:0.0.9'],
    ['other-registry', 'registry.example.com/queen-operator:0.1.0'],
  ]) {
    const r = await client.applyManifest(`apiVersion: v1\nkind: Pod\nmetadata: { name: ${pod} }\nspec:\n  containers: [{ name: operator, image: ${image} }]\n`, ns);
    expect(r.stderr).toBe('');
    const waiting = await until(`${pod} failing to pull`, async () => {
      const out = await client.kubectl(['-n', ns, 'get', 'pod', pod, '-o', 'jsonpath={.status.containerStatuses[0].state.waiting}']);
      return /ErrImagePull|ImagePullBackOff/.test(out.stdout) ? out.stdout : undefined;
    }, 60_000);
    expect(waiting).toContain(`${image}: not found`);
  }
});
