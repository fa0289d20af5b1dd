// Check (f): with the tools cached, a whole test bed starts in under 20 seconds on this machine
// (printed, not asserted: the other tests run beside it), and stopping it leaves no process.
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { expect, it } from 'vitest';
import { until } from './checks.ts';
import { connect } from './client.ts';
import { isAlive } from './procs.ts';
import { startTestbed } from './testbed.ts';

/** Processes whose command line names the folder (every process a test bed starts does). */
function processesMentioning(text: string): string[] {
  const out: string[] = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      const env = readFileSync(`/proc/${pid}/environ`, 'utf8');
      if (cmd.includes(text) || env.includes(text)) out.push(`${pid} ${cmd.slice(0, 120)}`);
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

it('a test bed starts (time printed) and stopping it leaves no process behind', async () => {
  const tb = await startTestbed({ timeFactor: 0.2, handleSignals: false });
  let stopped = false;
  try {
    console.log(`check (f): the whole test bed started in ${(tb.info.startupMs / 1000).toFixed(1)} s (goal: under 20 s with the tools cached; other tests run beside this one)`);
    // A pod, so that a simulated container runs too.
    const client = connect(tb.info);
    const ns = await client.newNamespace('startup-f');
    const applied = await client.applyManifest(
      `
apiVersion: v1
kind: Pod
metadata: { name: sleeper }
spec:
  containers: [{ name: main, image: busybox:1.36 }]
`,
      ns,
    );
    expect(applied.code).toBe(0);
    await until('the pod Running', async () => (await client.kube().get<any>(`/api/v1/namespaces/${ns}/pods/sleeper`)).status?.phase === 'Running', 60_000);
    await client.kube().close();

    const pids = tb.processes();
    const container = (await client.control.pod(ns, 'sleeper')).pid;
    expect(container).toBeGreaterThan(0);
    expect(pids).toContain(container);
    // etcd, kube-apiserver, kube-controller-manager, kube-scheduler, temporal, the container
    expect(pids.length).toBeGreaterThanOrEqual(6);
    expect(processesMentioning(tb.dir).length).toBeGreaterThanOrEqual(6);

    const t0 = Date.now();
    await tb.stop();
    stopped = true;
    console.log(`check (f): stopped in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    expect(pids.filter((pid) => isAlive(pid))).toEqual([]);
    expect(processesMentioning(tb.dir)).toEqual([]);
    expect(existsSync(tb.dir)).toBe(false);
  } finally {
    if (!stopped) await tb.stop();
  }
});
