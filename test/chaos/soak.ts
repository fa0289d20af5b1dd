// The soak: one cluster, a seeded run of random operations (spec changes and annotations) with
// random faults between and during them, the load client pushing throughout, and the invariants
// checked all the time: never a voter stopped by the operator while another is down, nothing
// acknowledged lost, every operation ends or says why it waits. The seed is printed; the same seed
// makes the same choices (`npm run chaos -- --seed N`). Timing on a shared machine still varies,
// so a fault may land on another step of the same operation.
import { ANNOTATIONS, type QueenCluster } from '../../crd/schema.ts';
import { control } from '../testbed/client.ts';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { annotate, formed, getCluster, kubectl, patchSpec, pods, row, scenario, seedSpec, sleep, voterIps, waitFor, type Scenario } from '../e2e/harness.ts';
import { currentStep } from '../e2e/temporal.ts';
import { stopNodeOf } from './cell.ts';
import { track, type Tracker } from './tracker.ts';
import { rng, type SoakResult } from './results.ts';

export const SOAK_FAULTS = ['none', 'operator-kill', 'temporal-restart', 'apiserver-restart', 'voter-kill', 'leader-kill', 'node-stop'] as const;
export type SoakFault = (typeof SOAK_FAULTS)[number];

export interface SoakOptions {
  seed: number;
  /** How many operations (default 8). */
  operations?: number;
  /** Faults that hit the whole test bed (the Temporal server, the API server, a node) are left out. */
  localOnly?: boolean;
  log?: (line: string) => void;
}

interface Step {
  what: string;
  /** The lastOperation type it ends with. */
  type: string;
  apply: (s: Scenario) => Promise<void>;
}

/** Runs the soak; the result lists each operation with its fault, and every broken promise. */
export async function soak(opts: SoakOptions): Promise<SoakResult> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const random = rng(opts.seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const count = opts.operations ?? 8;
  const result: SoakResult = { soak: true, seed: opts.seed, steps: [], pushes: 0, pushesFailed: 0, lost: 0, violations: [], seconds: 0 };
  const began = Date.now();
  log(`soak seed ${opts.seed} (${count} operations): rerun it with npm run chaos -- --seed ${opts.seed}`);
  const s = await scenario('chaos-soak');
  let tracker: Tracker | null = null;
  const load = { current: null as ReturnType<typeof startLoad> | null };
  try {
    await s.install({}, { replicas: 2 });
    tracker = await track(s.kc, s.ns);
    // Half of the volumes' file systems wait for their pod to start again when they grow.
    await control.setResizePendingShare(0.5, s.ns);
    await formed(s, seedSpec());
    load.current = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 20 });
    let patch = 0;
    let replicas = 3;
    let size = 1;
    for (let i = 0; i < count; i++) {
      const qc = await getCluster(s);
      const voters: number[] = qc.status?.voters ?? [];
      const choices: Step[] = [
        { what: `upgrade to 2.6.${patch + 1}`, type: 'RollingUpgrade', apply: (x) => patchSpec(x, { version: `2.6.${++patch}` }) },
        { what: `scale to ${replicas === 3 ? 5 : 3} voters`, type: 'ScaleVoters', apply: (x) => patchSpec(x, { replicas: (replicas = replicas === 3 ? 5 : 3) as 3 | 5 }) },
        { what: `grow the volumes to ${size + 1}Gi`, type: 'GrowVolumes', apply: (x) => patchSpec(x, { storage: { size: `${++size}Gi` } }) },
      ];
      const victim = pick(voters.length ? voters : [1, 2, 3]);
      choices.push({ what: `replace pod queen-${victim - 1}`, type: 'ReplaceNode', apply: (x) => annotate(x, { [ANNOTATIONS.replacePod]: `queen-${victim - 1}` }) });
      const step = pick(choices);
      const faults = opts.localOnly ? SOAK_FAULTS.filter((f) => ['none', 'operator-kill', 'voter-kill', 'leader-kill'].includes(f)) : SOAK_FAULTS;
      const fault = pick(faults);
      const delayMs = Math.floor(random() * 20_000);
      const entry = { what: `${step.what}, ${fault === 'none' ? 'no fault' : `${fault} ${Math.round(delayMs / 1000)} s in`}`, outcome: '', seconds: null as number | null, notes: [] as string[] };
      result.steps.push(entry);
      log(`soak ${opts.seed} #${i + 1}: ${entry.what}`);
      const t0 = Date.now();
      await step.apply(s);
      const injected = injectSoakFault(s, tracker, fault, delayMs, t0, entry.notes);
      const end = await awaitOperation(s, step.type, t0, 15 * 60_000);
      await injected.catch((e) => entry.notes.push(`the fault failed: ${(e as Error).message}`));
      entry.outcome = end.outcome;
      entry.seconds = end.finishedAt ? Math.round((end.finishedAt - t0) / 1000) : null;
      if (end.outcome !== 'finished') result.violations.push(`#${i + 1} ${entry.what}: ${end.outcome}`);
      // Between operations the cluster comes back to Ready (a fault may have left a pod restarting).
      const ready = await waitFor('Ready between operations', async () => (await getCluster(s)).status?.phase === 'Ready', 300_000).catch(() => false);
      if (!ready) {
        result.violations.push(`#${i + 1} ${entry.what}: the cluster was not Ready again within 5 min: ${row(await getCluster(s))}`);
        break;
      }
      log(`soak ${opts.seed} #${i + 1}: ${entry.outcome} in ${entry.seconds ?? '?'} s${entry.notes.length ? ` (${entry.notes.join('; ')})` : ''}`);
    }
    const report = await load.current.stop();
    load.current = null;
    result.pushes = report.sent;
    result.pushesFailed = report.failedAttempts.length;
    const lost = await verifyAcknowledged(report, await voterIps(s));
    result.lost = lost.length;
    if (lost.length) result.violations.push(`${lost.length} acknowledged messages lost (${lost.slice(0, 3).join(', ')}...)`);
    for (const d of tracker.disruptions.filter((x) => x.othersDown.some((o) => o.downForMs > 2000))) {
      result.violations.push(`the operator stopped ${d.pod} while ${d.othersDown.map((o) => `${o.pod} (down ${Math.round(o.downForMs / 1000)} s)`).join(', ')} was down`);
    }
  } catch (e) {
    result.violations.push(`the soak failed: ${(e as Error).message}`);
  } finally {
    if (load.current) await load.current.stop().catch(() => undefined);
    if (result.violations.length && tracker) result.steps.push({ what: 'status timeline', outcome: tracker.timeline.slice(-60).join(' | '), seconds: null, notes: [] });
    tracker?.stop();
    await restartNodes().catch(() => undefined);
    await s.close().catch(() => undefined);
    result.seconds = Math.round((Date.now() - began) / 1000);
  }
  return result;
}

async function restartNodes(): Promise<void> {
  const info = await control.call<{ nodes: string[] }>('GET', '/');
  for (const n of info.nodes) await control.call('POST', `/nodes/${n}/start`, {});
}

/** One fault, `delayMs` into the operation; its notes say what it did and when. */
async function injectSoakFault(s: Scenario, tracker: Tracker, fault: SoakFault, delayMs: number, t0: number, notes: string[]): Promise<void> {
  if (fault === 'none') return;
  await sleep(delayMs);
  const at = () => `+${Math.round((Date.now() - t0) / 1000)}s`;
  const qc: QueenCluster | undefined = tracker.cluster();
  const voters: number[] = qc?.status?.voters ?? [];
  const leader = qc?.status?.leader ?? null;
  switch (fault) {
    case 'operator-kill': {
      // The replica running the current step (or any, between steps), deleted by force.
      const step = await currentStep(s, `queencluster/${s.ns}/queen`).catch(() => null);
      const replicas = (await s.installed!.pods(s.core)).map((p) => p.metadata!.name!);
      const victim = step?.pod && replicas.includes(step.pod) ? step.pod : replicas[0]!;
      await kubectl(['-n', s.ns, 'delete', 'pod', victim, '--grace-period=0', '--force']);
      notes.push(`${at()} operator replica ${victim} deleted by force${step ? ` during ${step.activity}` : ''}`);
      return;
    }
    case 'temporal-restart':
    case 'apiserver-restart': {
      const name = fault === 'temporal-restart' ? 'temporal' : 'kube-apiserver';
      await control.killProcess(name);
      notes.push(`${at()} ${name} killed`);
      await sleep(15_000);
      await control.startProcess(name);
      notes.push(`${at()} ${name} started again`);
      return;
    }
    case 'voter-kill':
    case 'leader-kill': {
      const follower = voters.filter((v) => v !== leader);
      const id = fault === 'leader-kill' && leader ? leader : follower[Math.floor(follower.length / 2)] ?? voters[0];
      if (!id) return;
      const pod = `queen-${id - 1}`;
      tracker.exempt(pod, Date.now() + 60_000);
      await control.kill(s.ns, pod, { signal: 'SIGKILL', hold: true }).catch((e) => notes.push(`${pod} could not be killed: ${(e as Error).message}`));
      notes.push(`${at()} ${pod}${id === leader ? ' (the leader)' : ''} killed`);
      await sleep(10_000);
      await control.release(s.ns, pod).catch(() => undefined);
      return;
    }
    case 'node-stop': {
      const follower = voters.filter((v) => v !== leader);
      const pod = `queen-${(follower[0] ?? 1) - 1}`;
      const node = await stopNodeOf(s, tracker, pod, 600_000);
      if (!node) return;
      notes.push(`${at()} node ${node} (of ${pod}) stopped`);
      let told = '';
      await waitFor(
        'a status about the stopped node',
        async () => {
          const st = tracker.cluster()?.status;
          if (!st?.operation) return true;
          return st.message?.includes(node) ? (told = st.message) : false;
        },
        180_000,
      ).catch(() => undefined);
      if (told) notes.push(`${at()} status: ${told}`);
      await control.call('POST', `/nodes/${node}/start`, {});
      notes.push(`${at()} node ${node} started again`);
      return;
    }
  }
}

/** Waits for the operation of `type` begun after `since` to end; its outcome in words. */
async function awaitOperation(s: Scenario, type: string, since: number, timeoutMs: number): Promise<{ outcome: string; finishedAt: number | null }> {
  const deadline = Date.now() + timeoutMs;
  let last: QueenCluster | null = null;
  for (;;) {
    try {
      last = await getCluster(s);
      const lo = last.status?.lastOperation;
      if (lo && lo.type === type && Date.parse(lo.startedAt ?? '') >= since - 2000 && !last.status?.operation) {
        const finishedAt = Date.parse(lo.finishedAt ?? '') || Date.now();
        return { outcome: lo.result === 'Succeeded' ? 'finished' : `${lo.result}: ${lo.message}`, finishedAt };
      }
    } catch {
      // the API server may be away (a fault)
    }
    if (Date.now() > deadline) return { outcome: `no end within ${Math.round(timeoutMs / 60_000)} min: ${last ? row(last) : 'no status'}`, finishedAt: null };
    await sleep(1000);
  }
}
