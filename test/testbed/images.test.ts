// Images that are not there (issue 12, item 3): the kubelet pulls a Queen image from the test
// bed's registry as a kubelet does. A new tag takes the registry's pull time (Pulling, then
// Pulled); an image already on the node is not pulled again; a tag the registry does not have
// gives ErrImagePull, then ImagePullBackOff, and is tried again after the back-off.
import { afterAll, expect, it } from 'vitest';
import { listPods, until } from './checks.ts';
import { connect, control } from './client.ts';

const client = connect();
let ns = '';

afterAll(async () => {
  await control.registry({ missing: [], pullSeconds: 3 });
  if (ns) await client.deleteNamespace(ns);
});

const pod = (name: string, image: string, node: string) => `apiVersion: v1
kind: Pod
metadata: { name: ${name} }
spec:
  nodeName: ${node}
  containers:
    - name: queen
      image: ${image}
      env: [{ name: QUEEN_RAFT_DIR, value: /tmp/raft }]
`;

async function events(name: string): Promise<{ type: string; reason: string; message: string }[]> {
  const list = await client.kube().get<any>(`/api/v1/namespaces/${ns}/events`, { query: { fieldSelector: `involvedObject.name=${name}` } });
  // Timestamps are whole seconds (a pull at the time factor takes less): the order the API server
  // stored them in (their resourceVersion, etcd's revision here) tells two of the same second apart.
  return list.items
    .sort(
      (a: any, b: any) =>
        String(a.firstTimestamp ?? a.eventTime).localeCompare(String(b.firstTimestamp ?? b.eventTime)) || Number(a.metadata.resourceVersion) - Number(b.metadata.resourceVersion),
    )
    .map((e: any) => ({ type: e.type, reason: e.reason, message: e.message }));
}

it('a new tag takes its pull time; a present one is not pulled; a missing one: ErrImagePull, ImagePullBackOff, pulled once the registry has it', async () => {
  ns = await client.newNamespace('images');
  // A tag no test pulled before, with a pull of 4 s (0.8 s at the time factor 0.2).
  const tag = `2.6.${Date.now() % 100000}`;
  const image = `ghcr.io/queen-mq/queen:${tag}`;
  await control.registry({ pullSeconds: 4 });
  expect((await client.applyManifest(pod('first', image, 'tb-node-1'), ns)).code).toBe(0);
  await until('first running', async () => (await listPods(client, ns, ''))[0]?.status?.containerStatuses?.[0]?.state?.running, 60_000);
  // One pull. A restart of the container since (a busy machine) starts it from the image it has,
  // which its own Pulled Event says: one per restart the pod counts. The Events and the count are
  // read until they agree (a restart between the two reads failed a CI run: 2 Events, 1 restart).
  const present = `Container image "${image}" already present on machine`;
  const first = await until(
    'the Pulled Events and the restart count agreeing',
    async () => {
      const pulls = (await events('first')).filter((e) => e.reason === 'Pulling' || e.reason === 'Pulled').map((e) => e.message);
      const restarts = (await listPods(client, ns, ''))[0]?.status?.containerStatuses?.[0]?.restartCount ?? 0;
      return pulls.filter((m) => m === present).length === restarts ? { pulls, restarts } : undefined;
    },
    30_000,
  );
  expect(first.pulls).toEqual([
    `Pulling image "${image}"`,
    `Successfully pulled image "${image}" in 4s (4s including waiting). Image size: 48234496 bytes.`,
    ...Array.from({ length: first.restarts }, () => present),
  ]);
  expect((await control.registry()).present['tb-node-1']).toContain(image);
  expect((await client.applyManifest(pod('second', image, 'tb-node-1'), ns)).code).toBe(0);
  await until('second running', async () => (await listPods(client, ns, '')).find((p) => p.metadata.name === 'second')?.status?.containerStatuses?.[0]?.state?.running, 60_000);
  expect((await events('second')).filter((e) => e.reason === 'Pulled').map((e) => e.message)).toEqual([`Container image "${image}" already present on machine`]);

  // A tag the registry does not have (named through the control API).
  const missing = `ghcr.io/queen-mq/queen:${tag}-rc1`;
  await control.registry({ missing: [`${tag}-rc1`] });
  expect((await client.applyManifest(pod('broken', missing, 'tb-node-2'), ns)).code).toBe(0);
  const seen = new Set<string>();
  const waiting = await until(
    'ImagePullBackOff',
    async () => {
      const p = (await listPods(client, ns, '')).find((x) => x.metadata.name === 'broken');
      const w = p?.status?.containerStatuses?.[0]?.state?.waiting;
      if (w?.reason) seen.add(w.reason);
      return w?.reason === 'ImagePullBackOff' ? { p, w } : undefined;
    },
    60_000,
    50,
  );
  expect(seen.has('ErrImagePull')).toBe(true);
  expect(waiting.p!.status.phase).toBe('Pending');
  expect(waiting.w.message).toBe(
    `Back-off pulling image "${missing}": ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image "${missing}": failed to resolve reference "${missing}": ${missing}: not found`,
  );
  const ev = await events('broken');
  expect(ev.map((e) => `${e.type} ${e.reason} ${e.message.split(':')[0]}`)).toEqual(
    expect.arrayContaining([
      `Normal Pulling Pulling image "${missing.split(':')[0]}`,
      `Warning Failed Failed to pull image "ghcr.io/queen-mq/queen`,
      'Warning Failed Error',
      `Normal BackOff Back-off pulling image "ghcr.io/queen-mq/queen`,
    ]),
  );
  expect(ev.some((e) => e.message === 'Error: ErrImagePull')).toBe(true);
  expect(ev.some((e) => e.message === 'Error: ImagePullBackOff')).toBe(true);
  expect((await control.pod(ns, 'broken')).running).toBe(false);

  // The registry gets the tag: the next try after the back-off pulls it and the container starts.
  await control.registry({ missing: [] });
  await until('broken running after its back-off', async () => (await listPods(client, ns, '')).find((p) => p.metadata.name === 'broken')?.status?.containerStatuses?.[0]?.state?.running, 60_000);
  // A tag with "missing" in it is never there.
  expect((await client.applyManifest(pod('never', 'ghcr.io/queen-mq/queen:2.6.9-missing', 'tb-node-3'), ns)).code).toBe(0);
  await until('ErrImagePull for a -missing tag', async () => {
    const w = (await listPods(client, ns, '')).find((p) => p.metadata.name === 'never')?.status?.containerStatuses?.[0]?.state?.waiting;
    return w?.reason === 'ErrImagePull' || w?.reason === 'ImagePullBackOff';
  }, 30_000);
});
