// The control API's /processes (for the chaos tests): the API server and the Temporal server killed
// (SIGKILL) and started again come back on their data, at the same addresses. In a test bed of its
// own: killing the shared one's control plane would fail the scenarios running beside it.
import { Client, Connection } from '@temporalio/client';
import { expect, it } from 'vitest';
import { connect } from './client.ts';
import { startTestbed } from './testbed.ts';

it('kube-apiserver and temporal killed and started again: the same addresses, the data kept', async () => {
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
    await kube.close();
  } finally {
    await tb.stop();
  }
});
