// Checks shared by the tests and `npm run testbed:smoke`, each asserting what a user would see.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import type { TestbedClient } from './client.ts';
import type { KObject } from './kube.ts';

export const SEED_MANIFEST_PATH = fileURLToPath(new URL('./manifests/seed-001.yaml', import.meta.url));

/** The seed 001 manifest for a namespace: only the peer names carry the namespace. */
export function seedManifest(namespace: string): string {
  return readFileSync(SEED_MANIFEST_PATH, 'utf8').replaceAll('.queen.svc.cluster.local', `.${namespace}.svc.cluster.local`);
}

export async function until<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs: number, intervalMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${Math.round(timeoutMs / 1000)} s${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export async function getJson(url: string, timeoutMs = 5000): Promise<{ status: number; body: any }> {
  const res = await request(url, { headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  const text = await res.body.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.statusCode, body };
}

export async function sendJson(method: 'PUT' | 'POST', url: string, payload: unknown, timeoutMs = 5000): Promise<{ status: number; body: any }> {
  const res = await request(url, {
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(payload),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  const text = await res.body.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.statusCode, body };
}

export const isReady = (pod: KObject) => (pod.status?.conditions ?? []).some((c: any) => c.type === 'Ready' && c.status === 'True');

export async function listPods(client: TestbedClient, namespace: string, selector: string): Promise<KObject[]> {
  const list = await client.kube().get<{ items: KObject[] }>(`/api/v1/namespaces/${namespace}/pods`, { query: { labelSelector: selector } });
  return list.items.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name, 'en', { numeric: true }));
}

/** Creates the Secret with the command the seed gives (random hex values, as openssl rand -hex 32). */
export async function createSeedSecret(client: TestbedClient, namespace: string): Promise<void> {
  const hex = () => randomBytes(32).toString('hex');
  const r = await client.kubectl(['-n', namespace, 'create', 'secret', 'generic', 'queen', `--from-literal=QUEEN_RAFT_TOKEN=${hex()}`, `--from-literal=QUEEN_ENCRYPTION_KEY=${hex()}`]);
  if (r.code !== 0) throw new Error(`kubectl create secret: ${r.stderr.trim()}`);
}

export interface MembershipView {
  leader: number | null;
  term: number;
  voters: number[];
  members: Array<{ nodeId: number; live: boolean; lag: number | null; voter: boolean }>;
}

export async function membership(ip: string): Promise<MembershipView> {
  const r = await getJson(`http://${ip}:6632/api/v1/system/raft/membership`);
  if (r.status !== 200) throw new Error(`membership through ${ip}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.membership as MembershipView;
}

export function formed(view: MembershipView, voters: number[]): boolean {
  return (
    JSON.stringify(view.voters) === JSON.stringify(voters) &&
    view.members.length === voters.length &&
    view.members.every((m) => m.live === true && m.lag === 0)
  );
}

export interface SeedClusterResult {
  namespace: string;
  pods: Array<{ name: string; ip: string; node: string }>;
  voters: number[];
  leader: number | null;
  views: MembershipView[];
}

/**
 * Check (a): the seed 001 manifest, applied as it is (in `namespace`), forms a three-voter cluster:
 * the membership read through every pod lists voters [1,2,3], all live, lag 0; every pod is
 * Ready; a write commits through every pod.
 */
export async function checkSeedCluster(client: TestbedClient, namespace: string, opts: { log?: (line: string) => void; timeoutMs?: number } = {}): Promise<SeedClusterResult> {
  const log = opts.log ?? (() => {});
  const timeoutMs = opts.timeoutMs ?? 240_000;
  await createSeedSecret(client, namespace);
  const applied = await client.applyManifest(seedManifest(namespace), namespace);
  if (applied.code !== 0) throw new Error(`kubectl apply of the seed manifest: ${applied.stderr.trim()}`);
  log(applied.stdout.trim());
  const rollout = await client.kubectl(['-n', namespace, 'rollout', 'status', 'statefulset/queen', `--timeout=${Math.round(timeoutMs / 1000)}s`], { timeoutMs: timeoutMs + 10_000 });
  if (rollout.code !== 0) throw new Error(`kubectl rollout status: ${(rollout.stderr || rollout.stdout).trim()}`);
  log(rollout.stdout.trim());

  const pods = await until(
    'three Ready pods of the StatefulSet',
    async () => {
      const ps = await listPods(client, namespace, 'app=queen');
      return ps.length === 3 && ps.every((p) => isReady(p) && p.status?.podIP) ? ps : undefined;
    },
    timeoutMs,
  );
  const nodes = new Set(pods.map((p) => p.spec.nodeName));
  if (nodes.size !== 3) throw new Error(`the anti-affinity was not honoured: pods on ${[...nodes].join(', ')}`);

  const views = await until(
    'membership through every pod: voters [1,2,3], all live, lag 0',
    async () => {
      const vs = await Promise.all(pods.map((p) => membership(p.status.podIP)));
      return vs.every((v) => formed(v, [1, 2, 3])) ? vs : undefined;
    },
    timeoutMs,
    500,
  );
  for (const p of pods) {
    const key = `smoke-${randomBytes(4).toString('hex')}`;
    const r = await sendJson('PUT', `http://${p.status.podIP}:6632/api/v1/kv/testbed/${key}`, { value: { at: new Date().toISOString(), via: p.metadata.name }, ttlSeconds: 300 }, 30_000);
    if (r.status !== 200 || r.body?.applied !== true) throw new Error(`a write through ${p.metadata.name} did not commit: HTTP ${r.status} ${JSON.stringify(r.body)}`);
  }
  return {
    namespace,
    pods: pods.map((p) => ({ name: p.metadata.name, ip: p.status.podIP, node: p.spec.nodeName })),
    voters: views[0]!.voters,
    leader: views[0]!.leader,
    views,
  };
}
