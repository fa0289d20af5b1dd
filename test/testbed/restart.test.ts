// The control API's /processes (for the chaos tests): the API server and the Temporal server killed
// (SIGKILL) and started again come back on their data, at the same addresses, and a container that
// exited while the API server was away starts again once it answers. And a whole test bed started
// again on its folder (what `npm start` does the second time), a second one refused there while the
// first runs. In test beds of their own: killing the shared one's control plane would fail the
// scenarios running beside it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { expect, it } from 'vitest';
import { until } from './checks.ts';
import { connect } from './client.ts';
import { liveProcesses } from './procs.ts';
import { startTestbed } from './testbed.ts';

it('kube-apiserver and temporal killed and started again: the same addresses, the data kept; the scheduler that exits is started again', async () => {
  const tb = await startTestbed({ timeFactor: 0.2, handleSignals: false });
  try {
    const client = connect(tb.info);
    const kube = client.kube();
    await kube.create('/api/v1/namespaces/default/configmaps', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'kept' }, data: { a: '1' } });
    // A container whose environment comes from the API server (as a Queen pod's does).
    await kube.create('/api/v1/namespaces/default/pods', {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'with-env' },
      spec: { containers: [{ name: 'c', image: 'example/sleeper', env: [{ name: 'A', valueFrom: { configMapKeyRef: { name: 'kept', key: 'a' } } }] }] },
    });
    const withEnv = await until('pod with-env running', async () => {
      const info = await client.control.pod('default', 'with-env').catch(() => undefined);
      return info?.running ? info : undefined;
    }, 60_000);
    const connection = await Connection.connect({ address: tb.temporal.address });
    const temporal = new Client({ connection });
    // No worker takes it: it stays running, in the server's state file.
    await temporal.workflow.start('nobodyRunsThis', { taskQueue: 'restart-test', workflowId: 'kept' });

    expect((await client.control.call('GET', '/processes')).map((p: { name: string; running: boolean }) => [p.name, p.running])).toEqual([
      ['kube-apiserver', true],
      ['temporal', true],
    ]);
    const killed = await client.control.killProcess('kube-apiserver');
    expect(killed).toMatchObject({ name: 'kube-apiserver', running: false, exitCode: 137 });
    await expect(kube.get('/api/v1/namespaces/default/configmaps/kept')).rejects.toThrow();
    // Its container exits while the API server is away: the kubelet cannot read its environment
    // then, and starts it once it can.
    await client.control.kill('default', 'with-env');
    await new Promise((r) => setTimeout(r, 3000));
    expect((await client.control.pod('default', 'with-env')).running).toBe(false);
    await client.control.startProcess('kube-apiserver');
    const withEnvAgain = await until('pod with-env running again', async () => {
      const info = await client.control.pod('default', 'with-env');
      return info.running ? info : undefined;
    }, 60_000);
    expect(withEnvAgain.pid).not.toBe(withEnv.pid);
    expect(withEnvAgain.containers[0]!.env.A).toBe('1');
    // The node-lifecycle controller marks the pods of a node it lost track of not Ready; once the
    // kubelet reaches the API server again it writes its own view back.
    const podPath = '/api/v1/namespaces/default/pods/with-env';
    const podReady = async () => ((await kube.get<any>(podPath)).status?.conditions ?? []).find((c: any) => c.type === 'Ready')?.status;
    await until('pod with-env Ready', async () => (await podReady()) === 'True', 60_000);
    const marked = ((await kube.get<any>(podPath)).status.conditions as any[]).map((c) => (c.type === 'Ready' ? { ...c, status: 'False', reason: 'NodeNotReady' } : c));
    await kube.req('PATCH', `${podPath}/status`, { status: { conditions: marked } }, { contentType: 'application/strategic-merge-patch+json' });
    await until('pod with-env Ready again', async () => (await podReady()) === 'True', 30_000);
    expect((await kube.get<any>('/api/v1/namespaces/default/configmaps/kept')).data).toEqual({ a: '1' });
    // An outage long enough for the Leases to go stale: the node-lifecycle controller writes each
    // node's conditions Unknown (and taints it unreachable). The kubelet posts its own view again
    // once it reaches the API server: the node is Ready, and schedulable, within a renewal or two.
    const nodePath = '/api/v1/nodes/tb-node-1';
    const unknown = ((await kube.get<any>(nodePath)).status.conditions as any[]).map((c) => ({ ...c, status: 'Unknown', reason: 'NodeStatusUnknown', message: 'Kubelet stopped posting node status.' }));
    await kube.mergePatch(`${nodePath}/status`, { status: { conditions: unknown } });
    expect(((await kube.get<any>(nodePath)).status.conditions as any[]).find((c) => c.type === 'Ready').status).toBe('Unknown');
    await until('tb-node-1 Ready again, not tainted unreachable', async () => {
      const node = await kube.get<any>(nodePath);
      const ready = (node.status.conditions as any[]).find((c) => c.type === 'Ready')?.status === 'True';
      return ready && !(node.spec.taints ?? []).some((t: any) => t.key === 'node.kubernetes.io/unreachable');
    }, 60_000);

    expect(await client.control.killProcess('temporal')).toMatchObject({ running: false, exitCode: 137 });
    await client.control.startProcess('temporal');
    const again = new Client({ connection: await Connection.connect({ address: tb.temporal.address }) });
    expect((await again.workflow.getHandle('kept').describe()).status.name).toBe('RUNNING');
    await again.connection.close();
    await connection.close().catch(() => undefined);

    // The scheduler (like the controller manager) is a service the machine starts again when it
    // exits: killed, it comes back, and pods are scheduled again.
    const scheduler = () => liveProcesses().find((p) => p.name === 'kube-scheduler' && p.owner === tb.dir && !p.exit);
    const first = scheduler()!;
    process.kill(first.pid, 'SIGKILL');
    await first.exited;
    const deadline = Date.now() + 30_000;
    while (!scheduler() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(scheduler()?.pid).not.toBe(first.pid);
    await kube.create('/api/v1/namespaces/default/pods', { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'placed' }, spec: { containers: [{ name: 'c', image: 'example/sleeper' }] } });
    let node: string | undefined;
    for (const until = Date.now() + 60_000; !node && Date.now() < until; await new Promise((r) => setTimeout(r, 500))) {
      node = (await kube.get<{ spec?: { nodeName?: string } }>('/api/v1/namespaces/default/pods/placed')).spec?.nodeName;
    }
    expect(node).toMatch(/^tb-node-/);
    await kube.close();
  } finally {
    await tb.stop();
  }
});

it('a test bed started again on its folder: its pods run again on the addresses their status shows, and a new pod gets another', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tb-again-'));
  const sleeper = (name: string) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec: { containers: [{ name: 'c', image: 'example/sleeper' }] } });
  const podPath = (name: string) => `/api/v1/namespaces/default/pods/${name}`;
  let tb = await startTestbed({ dir, timeFactor: 0.2, handleSignals: false });
  try {
    let client = connect(tb.info);
    await client.kube().create('/api/v1/namespaces/default/pods', sleeper('kept'));
    const before = await until('pod kept running', async () => {
      const info = await client.control.pod('default', 'kept').catch(() => undefined);
      return info?.running ? info : undefined;
    }, 60_000);
    // The kubelet writes the pod's status a moment after it started the process.
    expect(await until('pod kept shows its IP', async () => (await client.kube().get<any>(podPath('kept'))).status?.podIP, 30_000)).toBe(before.ip);
    // A second test bed on a folder whose test bed runs (`npm start` in a second terminal) is
    // refused, and says how to reach the one that runs; that one goes on.
    await expect(startTestbed({ dir, timeFactor: 0.2, handleSignals: false })).rejects.toThrow(
      new RegExp(`a test bed already runs in ${dir} \\(process ${process.pid}, this one\\).*export KUBECONFIG=${dir}/kubeconfig`),
    );
    expect((await client.kube().get<any>(podPath('kept'))).status?.podIP).toBe(before.ip);
    await tb.stop();

    tb = await startTestbed({ dir, timeFactor: 0.2, handleSignals: false });
    client = connect(tb.info);
    const after = await until('pod kept running again', async () => {
      const info = await client.control.pod('default', 'kept').catch(() => undefined);
      return info?.running ? info : undefined;
    }, 60_000);
    expect(after.uid).toBe(before.uid);
    expect(after.pid).not.toBe(before.pid);
    expect(after.ip).toBe(before.ip);
    expect((await client.kube().get<any>(podPath('kept'))).status?.podIP).toBe(after.ip);

    await client.kube().create('/api/v1/namespaces/default/pods', sleeper('fresh'));
    const fresh = await until('pod fresh running', async () => {
      const info = await client.control.pod('default', 'fresh').catch(() => undefined);
      return info?.running ? info : undefined;
    }, 60_000);
    expect(fresh.ip).not.toBe(after.ip);
  } finally {
    await tb.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
