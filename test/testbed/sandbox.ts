// `npm start`: the operator (main.ts, as a process of its own) with what a newcomer's machine lacks
// started beside it. With no Kubernetes cluster configured (no KUBECONFIG, no ~/.kube/config, not
// in a pod), or with --sandbox, the local sandbox: the test bed (a real control plane, simulated
// nodes and Queen brokers, a Temporal server) with the QueenCluster definition and the operator's
// ServiceAccount and ClusterRole installed; the operator runs under that account and reaches the
// brokers at their pod addresses. With a cluster but no TEMPORAL_ADDRESS (or --temporal-address),
// a local Temporal dev server, its state in .cache/operator/temporal. Everything else is passed
// to main.ts unchanged (`npm start -- --help` lists the operator's flags).
//
// The operator's own code has no sandbox branch: it never starts one, and an API server that does
// not answer is waited for, never replaced by a sandbox.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { applyObject, loadKubeConfig, makeKube } from '../../activities/kube.ts';
import { kubeConfigured } from '../../connect.ts';
import { startTemporal } from './temporal.ts';
import { startTestbed } from './testbed.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = join(root, 'main.ts');
const STATE = join(root, '.cache', 'operator');

const argv = process.argv.slice(2);
const sandboxAsked = argv.includes('--sandbox');
const passed = argv.filter((a) => a !== '--sandbox');
const flag = (name: string) => {
  const i = passed.findIndex((a) => a === name || a.startsWith(`${name}=`));
  if (i < 0) return undefined;
  return passed[i]!.includes('=') ? passed[i]!.split('=').slice(1).join('=') : passed[i + 1];
};
const helpAsked = passed.includes('--help') || passed.includes('-h');

const say = (line: string) => process.stdout.write(`${line}\n`);
const stops: Array<() => Promise<void>> = [];
const env: NodeJS.ProcessEnv = { ...process.env };

async function prepare(): Promise<void> {
  const kubeconfig = flag('--kubeconfig') ?? process.env.KUBECONFIG;
  if (sandboxAsked || !kubeConfigured(kubeconfig)) {
    say(sandboxAsked ? 'starting the local sandbox (--sandbox)' : 'no Kubernetes cluster is configured: starting the local sandbox');
    say('  a Kubernetes control plane, simulated nodes running simulated Queen brokers, a Temporal server (about 10 s; the first time the tools are built from source, see test/testbed/README.md)');
    const tb = await startTestbed({ dir: join(STATE, 'sandbox'), timeFactor: 1, handleSignals: false, log: (l) => l.startsWith('build-tools:') && say(l) });
    stops.push(() => tb.stop());
    const kube = makeKube(tb.kubeConfig());
    // The definition and the operator's account and rights, as deploy/install.yaml has them.
    for (const doc of parseAllDocuments(readFileSync(join(root, 'deploy', 'install.yaml'), 'utf8'))) {
      const obj = doc.toJSON() as { kind?: string } | null;
      if (obj?.kind && obj.kind !== 'Deployment' && obj.kind !== 'PodDisruptionBudget') await applyObject(kube, obj as never);
    }
    env.KUBECONFIG = await tb.serviceAccountKubeconfig('queen-system', 'queen-operator');
    if (!flag('--temporal-address') && !process.env.TEMPORAL_ADDRESS) env.TEMPORAL_ADDRESS = tb.temporal.address;
    if (!flag('--broker-access') && !process.env.QUEEN_BROKER_ACCESS) env.QUEEN_BROKER_ACCESS = 'pod-ip';
    say('');
    say('The sandbox runs. In another terminal:');
    say(`  export KUBECONFIG=${tb.kubeconfigPath}`);
    say(`  kubectl apply -f ${join(root, 'deploy', 'examples', 'queen.yaml')}`);
    say('  kubectl -n queen get queencluster -w');
    say(`Temporal Web UI: ${tb.temporal.uiUrl}`);
    say(`(a kubectl of the same version: ${tb.info.tools.kubectl})`);
    say('');
    return;
  }
  if (!flag('--temporal-address') && !process.env.TEMPORAL_ADDRESS) {
    mkdirSync(STATE, { recursive: true });
    const t = await startTemporal({ dir: join(STATE, 'temporal'), persistent: true });
    stops.push(() => t.stop());
    await t.ready;
    env.TEMPORAL_ADDRESS = t.address;
    say(`Temporal runs locally at ${t.address} (its state in ${join(STATE, 'temporal')}); its Web UI: ${t.uiUrl}`);
  }
}

async function run(): Promise<number> {
  if (!helpAsked) await prepare();
  // The operator's health port would clash with another local process as easily as not: off
  // unless asked for.
  if (!flag('--health-port') && !env.QUEEN_HEALTH_PORT) env.QUEEN_HEALTH_PORT = '0';
  if (!flag('--metrics-port') && !env.QUEEN_METRICS_PORT) env.QUEEN_METRICS_PORT = '0';
  const child = spawn(process.execPath, [MAIN, ...passed], { stdio: 'inherit', env });
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  const code = await new Promise<number>((resolve) => child.on('exit', (c, s) => resolve(c ?? (s ? 128 + 15 : 1))));
  for (const stop of stops.reverse()) await stop().catch(() => undefined);
  return code;
}

run().then(
  (code) => process.exit(code),
  async (err) => {
    process.stderr.write(`npm start: ${err instanceof Error ? err.message : String(err)}\n`);
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    process.exit(1);
  },
);
