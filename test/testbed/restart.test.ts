// The control API's /processes (for the chaos tests): the API server and the Temporal server killed
// (SIGKILL) and started again come back on their data, at the same addresses. In a test bed of its
// own: killing the shared one's control plane would fail the scenarios running beside it.
import { Client, Connection } from '@temporalio/client';
import { expect, it } from 'vitest';
import { connect } from './client.ts';
import { liveProcesses } from './procs.ts';
import { startTestbed } from './testbed.ts';

it('kube-apiserver and temporal killed and started again: the same addresses, the data kept; the scheduler that exits is started again', async () => {
  const tb = await startTestbed({ timeFactor: 0.2, handleSignals: false });
  try {
    const client = connect(tb.info);
    const kube = client.kube();
    await kube.create('/api/v1/namespaces/default/configmaps', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'kept' }, data: { a: '1' } });
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
    await client.control.startProcess('kube-apiserver');
    expect((await kube.get<any>('/api/v1/namespaces/default/configmaps/kept')).data).toEqual({ a: '1' });

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
