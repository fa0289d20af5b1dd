// The soak: one cluster, a seeded run of random operations (spec changes and annotations) with
// random faults between and during them, the load client pushing throughout, and the invariants
// checked all the time: never a voter stopped by the operator while another is down, never two
// voters down by its hand (a watch of the pods, the fault's own victims exempt), nothing
// acknowledged lost, each membership change of an operation once in the brokers' Raft logs, every
// operation ends or says why it waits (a status that says nothing new for minutes with no named
// gate is a silent wait), a stopped node named in status. An operation is started one of several
// ways: as it is, planned first (queenmq.com/plan-only, then let go), paused for a while and
// resumed (queenmq.com/pause), or, for an upgrade, with spec.upgrade.approval Manual and approved
// once it waits at its gate `approved` (queenmq.com/approve). The seed is printed; the same seed
// makes the same choices (`npm run chaos -- --seed N`). Timing on a shared machine still varies,
// so a fault may land on another step of the same operation.
import { ordinalOf } from '../../crd/ordinals.ts';
import { ANNOTATIONS, type QueenCluster } from '../../crd/schema.ts';
import { names } from '../../activities/resources.ts';
import { control } from '../testbed/client.ts';
import { startLoad, verifyAcknowledged } from '../testbed/load.ts';
import { annotate, formed, getCluster, kubectl, patchSpec, pods, row, scenario, seedSpec, sleep, waitFor, type Scenario } from '../e2e/harness.ts';
import { currentStep } from '../e2e/temporal.ts';
import { FAILOVER_EXEMPT_MS, grantNodeReads, nodeNamed, reachableVoters, revokeNodeReads, stopNodeOf } from './cell.ts';
import { changeKey, followMembership, membershipViolations, type MembershipLog } from './membership.ts';
import { isReady, track, type Tracker } from './tracker.ts';
import { rng, type SoakResult } from './results.ts';

/** The pod of the soak's cluster (named queen) that runs this node. */
const podOf = (nodeId: number) => names.pod('queen', ordinalOf(nodeId));

export const SOAK_FAULTS = ['none', 'operator-kill', 'temporal-restart', 'apiserver-restart', 'voter-kill', 'leader-kill', 'node-stop'] as const;
export type SoakFault = (typeof SOAK_FAULTS)[number];

export interface SoakOptions {
  seed: number;
  /** How many operations (default 8), when no `minutes` is given. */
  operations?: number;
  /** How long to go on: operations start until this many minutes have passed (the last one then finishes). */
  minutes?: number;
  /** Faults that hit the whole test bed (the Temporal server, the API server, a node) are left out. */
  localOnly?: boolean;
  log?: (line: string) => void;
}

interface Step {
  what: string;
  /** The lastOperation type it ends with. */
  type: string;
  apply: (s: Scenario) => Promise<void>;
  /** The membership changes it makes, each once (membership.ts). */
  members: string[];
  /** An upgrade: its version, for an approval. */
  version?: string;
}

/** How an operation is started: as it is, planned first, paused a while, or approved by hand. */
export const SOAK_STARTS = ['as is', 'plan first', 'pause and resume', 'manual approval'] as const;
export type SoakStart = (typeof SOAK_STARTS)[number];

/** Runs the soak; the result lists each operation with its fault, and every broken promise. */
export async function soak(opts: SoakOptions): Promise<SoakResult> {
  const log = opts.log ?? ((l: string) => console.log(l));
  const random = rng(opts.seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const count = opts.operations ?? 8;
  const length = opts.minutes ? `${opts.minutes} min` : `${count} operations`;
  const result: SoakResult = { soak: true, seed: opts.seed, length, steps: [], pushes: 0, pushesFailed: 0, lost: 0, violations: [], seconds: 0 };
  const began = Date.now();
  // With a length in minutes, an operation starts while time is left (counted from the first one).
  let firstAt = 0;
  const more = (i: number) => (opts.minutes ? i === 0 || Date.now() - firstAt < opts.minutes * 60_000 : i < count);
  const again = opts.minutes ? `npm run chaos -- --seed ${opts.seed} --soak-minutes ${opts.minutes}` : `npm run chaos -- --seed ${opts.seed}${count === 8 ? '' : ` --ops ${count}`}`;
  log(`soak seed ${opts.seed} (${length}): rerun it with ${again}`);
  const s = await scenario('chaos-soak');
  let tracker: Tracker | null = null;
  let membership: MembershipLog | null = null;
  const load = { current: null as ReturnType<typeof startLoad> | null };
  try {
    // As the cluster-wide install would let it: the operator may read Nodes (cell.ts grantNodeReads).
    await grantNodeReads(s.ns);
    await s.install({}, { replicas: 2 });
    tracker = await track(s.kc, s.ns);
    // Half of the volumes' file systems wait for their pod to start again when they grow.
    await control.setResizePendingShare(0.5, s.ns);
    await formed(s, seedSpec());
    // The checks begin with the first operation: while the cluster forms, its new pods are not
    // Ready together, and none of that is a voter the operator stopped.
    tracker.reset();
    membership = await followMembership(s.ns);
    load.current = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: 'queen', rate: 20 });
    let patch = 0;
    let replicas = 3;
    let size = 1;
    for (let i = 0; more(i); i++) {
      if (i === 0) firstAt = Date.now();
      const qc = await getCluster(s);
      const voters: number[] = qc.status?.voters ?? [];
      const version = `2.6.${patch + 1}`;
      const up = replicas === 3;
      const choices: Step[] = [
        { what: `upgrade to ${version}`, type: 'RollingUpgrade', apply: (x) => patchSpec(x, { version: `2.6.${++patch}` }), members: [], version },
        {
          what: `scale to ${up ? 5 : 3} voters`,
          type: 'ScaleVoters',
          apply: (x) => patchSpec(x, { replicas: (replicas = replicas === 3 ? 5 : 3) as 3 | 5 }),
          members: up ? ['learner 4', 'learner 5', 'promote 4', 'promote 5'] : ['remove 4', 'remove 5'],
        },
        { what: `grow the volumes to ${size + 1}Gi`, type: 'GrowVolumes', apply: (x) => patchSpec(x, { storage: { size: `${++size}Gi` } }), members: [] },
      ];
      const victim = pick(voters.length ? voters : [1, 2, 3]);
      choices.push({
        what: `replace pod ${podOf(victim)}`,
        type: 'ReplaceNode',
        apply: (x) => annotate(x, { [ANNOTATIONS.replacePod]: podOf(victim) }),
        members: [`remove ${victim}`, `learner ${victim}`, `promote ${victim}`],
      });
      const step = pick(choices);
      const faults = opts.localOnly ? SOAK_FAULTS.filter((f) => ['none', 'operator-kill', 'voter-kill', 'leader-kill'].includes(f)) : SOAK_FAULTS;
      const fault = pick(faults);
      const delayMs = Math.floor(random() * 20_000);
      const start = pick(SOAK_STARTS.filter((x) => x !== 'manual approval' || step.type === 'RollingUpgrade'));
      const pauseAfterMs = Math.floor(random() * 15_000);
      const how = start === 'as is' ? '' : start === 'pause and resume' ? `, paused ${Math.round(pauseAfterMs / 1000)} s in` : `, ${start}`;
      const entry = { what: `${step.what}${how}, ${fault === 'none' ? 'no fault' : `${fault} ${Math.round(delayMs / 1000)} s in`}`, outcome: '', seconds: null as number | null, notes: [] as string[] };
      result.steps.push(entry);
      log(`soak ${opts.seed} #${i + 1} (+${Math.round((Date.now() - began) / 60_000)} min): ${entry.what}`);
      const broken = (v: string) => result.violations.push(`#${i + 1} ${entry.what}: ${v}`);
      await membership.poll();
      const logBefore = membership.lastIndex();
      tracker.expectOperation(true);
      if (start === 'plan first') await planFirst(s, tracker, step, entry.notes, broken);
      else if (start === 'manual approval') await untilAnswered(() => patchSpec(s, { upgrade: { approval: 'Manual' } }));
      const t0 = Date.now();
      // (Planned first, the change is made: letting plan-only go starts the operation.)
      if (start === 'plan first') await untilAnswered(() => annotate(s, { [ANNOTATIONS.planOnly]: null }));
      else await step.apply(s);
      const injected = injectSoakFault(s, tracker, fault, delayMs, t0, entry.notes, broken);
      const held =
        start === 'pause and resume'
          ? pauseAndResume(s, tracker, step.type, pauseAfterMs, t0, entry.notes, broken)
          : start === 'manual approval'
            ? approveAtGate(s, tracker, step, t0, entry.notes, broken)
            : Promise.resolve();
      const end = await awaitOperation(s, step.type, t0, 15 * 60_000);
      tracker.expectOperation(false);
      await injected.catch((e) => entry.notes.push(`the fault failed: ${(e as Error).message}`));
      await held.catch((e) => entry.notes.push(`the ${start} failed: ${(e as Error).message}`));
      if (start === 'manual approval') await untilAnswered(() => patchSpec(s, { upgrade: { approval: 'Automatic' } }));
      entry.outcome = end.outcome;
      entry.seconds = end.finishedAt ? Math.round((end.finishedAt - t0) / 1000) : null;
      if (end.outcome !== 'finished') broken(end.outcome);
      for (const v of tracker.silences.splice(0)) broken(v);
      // Between operations the cluster comes back to Ready (a fault may have left a pod restarting).
      const ready = await waitFor('Ready between operations', async () => (await getCluster(s)).status?.phase === 'Ready', 300_000).catch(() => false);
      // Membership: each change of this operation once in the brokers' logs (all of them, and no
      // other, once it finished).
      await membership.poll();
      const changes = membership.changes(logBefore);
      entry.notes.push(`membership changes: ${changes.map((ch) => `${changeKey(ch)} @${ch.index}`).join(', ') || 'none'}`);
      for (const v of membershipViolations(changes, end.outcome === 'finished' ? step.members : null)) broken(v);
      const joint = membership.jointAtEnd();
      if (joint && end.outcome === 'finished') broken(`a joint configuration is left in the Raft log: ${joint}`);
      for (const o of tracker.overDown.splice(0)) broken(`two voters down at one time: ${o}`);
      const marked = tracker.marked.splice(0);
      if (marked.length) entry.notes.push(`marked not Ready from outside their kubelets (not counted as down): ${marked.join('; ')}`);
      if (!ready) {
        broken(`the cluster was not Ready again within 5 min: ${row(await getCluster(s))}`);
        break;
      }
      log(`soak ${opts.seed} #${i + 1}: ${entry.outcome} in ${entry.seconds ?? '?'} s${entry.notes.length ? ` (${entry.notes.join('; ')})` : ''}`);
    }
    const report = await load.current.stop();
    load.current = null;
    result.pushes = report.sent;
    result.pushesFailed = report.failedAttempts.length;
    const checked: string[] = [];
    const lost = await verifyAcknowledged(report, await reachableVoters(s, checked));
    if (checked.length) result.steps.push({ what: 'the acknowledged messages', outcome: checked.join('; '), seconds: null, notes: [] });
    result.lost = lost.length;
    if (lost.length) result.violations.push(`${lost.length} acknowledged messages lost (${lost.slice(0, 3).join(', ')}...)`);
    for (const d of tracker.disruptions.filter((x) => x.othersDown.some((o) => o.downForMs > 2000))) {
      result.violations.push(`the operator stopped ${d.pod} while ${d.othersDown.map((o) => `${o.pod} (down ${Math.round(o.downForMs / 1000)} s)`).join(', ')} was down`);
    }
    for (const o of tracker.overDown) result.violations.push(`two voters down at one time: ${o}`);
    if (membership.problems.length) result.steps.push({ what: 'the Raft logs', outcome: [...new Set(membership.problems)].slice(0, 3).join('; '), seconds: null, notes: [] });
  } catch (e) {
    result.violations.push(`the soak failed: ${(e as Error).message}`);
  } finally {
    if (load.current) await load.current.stop().catch(() => undefined);
    if (result.violations.length && tracker) result.steps.push({ what: 'status timeline', outcome: tracker.timeline.slice(-60).join(' | '), seconds: null, notes: [] });
    tracker?.stop();
    membership?.stop();
    await restartNodes().catch(() => undefined);
    await s.close().catch(() => undefined);
    await revokeNodeReads(s.ns).catch(() => undefined);
    result.seconds = Math.round((Date.now() - began) / 1000);
  }
  return result;
}

async function restartNodes(): Promise<void> {
  const info = await control.call<{ nodes: string[] }>('GET', '/');
  for (const n of info.nodes) await control.call('POST', `/nodes/${n}/start`, {});
}

/** One fault, `delayMs` into the operation; its notes say what it did and when. */
async function injectSoakFault(s: Scenario, tracker: Tracker, fault: SoakFault, delayMs: number, t0: number, notes: string[], broken: (v: string) => void): Promise<void> {
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
      const pod = podOf(id);
      // The voters that stay and are Ready lose their readiness with the kill when it takes their
      // leader (until a new one is elected) or their majority (another voter not Ready then, e.g.
      // restarted by the operation): the world's hand, as a node's stop (cell.ts stopNodeOf); they
      // are exempt for FAILOVER_EXEMPT_MS. A voter already down is not (the operation's), and
      // whether the operator stops a pod while others are down is still checked (disruptions).
      const others = voters.filter((v) => v !== id).map(podOf);
      const ready = (await pods(s)).filter((p) => others.includes(p.metadata?.name ?? '') && isReady(p)).map((p) => p.metadata!.name!);
      const now = Date.now();
      tracker.exempt(pod, now + 60_000);
      if (id === leader || ready.length < Math.floor(voters.length / 2) + 1) for (const p of ready) tracker.exempt(p, now + FAILOVER_EXEMPT_MS);
      await control.kill(s.ns, pod, { signal: 'SIGKILL', hold: true }).catch((e) => notes.push(`${pod} could not be killed: ${(e as Error).message}`));
      notes.push(`${at()} ${pod}${id === leader ? ' (the leader)' : ''} killed`);
      await sleep(10_000);
      await control.release(s.ns, pod).catch(() => undefined);
      return;
    }
    case 'node-stop': {
      const follower = voters.filter((v) => v !== leader);
      const pod = podOf(follower[0] ?? 1);
      const node = await stopNodeOf(s, tracker, pod, 600_000);
      if (!node) return;
      notes.push(`${at()} node ${node} (of ${pod}) stopped`);
      // The operation ends, or its status names the node (plan/gates.ts nodeDownProblem).
      const told = await nodeNamed(tracker, node, 180_000);
      if (told.named) notes.push(`${at()} status: ${told.named}`);
      else if (told.ended) notes.push(`${at()} the operation ended while the node was stopped`);
      else broken(`no status named the stopped node ${node} within 180 s (the status said: ${told.last || 'nothing'})`);
      await control.call('POST', `/nodes/${node}/start`, {});
      notes.push(`${at()} node ${node} started again`);
      return;
    }
  }
}

/**
 * A person's change (a pause, its end, an approval) made again until the API server answers, as
 * the person would: a fault may have the API server down at that moment, and a pause left set
 * holds every operation after it.
 */
async function untilAnswered(change: () => Promise<unknown>, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await change();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(2000);
    }
  }
}

/**
 * Plans the step first: queenmq.com/plan-only, the change, a plan that names the operation in
 * status.plan while nothing starts (the caller then removes plan-only, and the operation starts).
 */
async function planFirst(s: Scenario, tracker: Tracker, step: Step, notes: string[], broken: (v: string) => void): Promise<void> {
  const lastRun = tracker.cluster()?.status?.lastOperation?.runId ?? null;
  await annotate(s, { [ANNOTATIONS.planOnly]: 'true' });
  await step.apply(s);
  const plan = await waitFor(
    `a plan of ${step.type}`,
    async () => {
      const qc = tracker.cluster();
      const p = qc?.status?.plan;
      return p?.operation === step.type && (step.type === 'ReplaceNode' || p.generation === qc.metadata.generation) ? p : undefined;
    },
    90_000,
  ).catch(() => null);
  if (!plan) broken(`no plan of ${step.type} in status.plan within 90 s (status: ${tracker.cluster()?.status?.message ?? ''})`);
  else notes.push(`planned: ${plan.message}`);
  // Nothing starts while plan-only holds it.
  await sleep(5000);
  const st = tracker.cluster()?.status;
  if (st?.operation || (st?.lastOperation?.runId ?? null) !== lastRun) broken(`an operation started while queenmq.com/plan-only was set: ${st?.operation?.type ?? st?.lastOperation?.type}`);
}

/**
 * Pauses the operation `afterMs` in (queenmq.com/pause) for 20 s: once the status says it is paused
 * (its gate not-paused), the operator stops no voter until the pause goes.
 */
async function pauseAndResume(s: Scenario, tracker: Tracker, type: string, afterMs: number, t0: number, notes: string[], broken: (v: string) => void): Promise<void> {
  await sleep(afterMs);
  const at = () => `+${Math.round((Date.now() - t0) / 1000)}s`;
  await untilAnswered(() => annotate(s, { [ANNOTATIONS.pause]: 'true' }));
  notes.push(`${at()} paused`);
  const held = await waitFor('the pause held', async () => (tracker.cluster()?.status?.operation?.gate === 'not-paused' ? true : undefined), 20_000).catch(() => false);
  const stopped = tracker.disruptions.length;
  if (held) notes.push(`${at()} held at not-paused: ${tracker.cluster()?.status?.message ?? ''}`);
  else notes.push(`${at()} no disruptive step came while paused (${tracker.cluster()?.status?.operation ? 'the operation went on' : `no ${type} running`})`);
  if (held) {
    await sleep(10_000);
    const during = tracker.disruptions.slice(stopped).map((d) => d.pod);
    if (during.length) broken(`the operator stopped ${during.join(', ')} while paused (queenmq.com/pause)`);
  }
  await untilAnswered(() => annotate(s, { [ANNOTATIONS.pause]: null }));
  notes.push(`${at()} resumed`);
}

/**
 * spec.upgrade.approval Manual: the upgrade waits before the leader at its gate `approved`, its
 * status saying the command that approves it; approved 5 s later. An upgrade that ends without
 * that wait stopped no pod that led at that moment (its broker asked as the deletion is seen).
 */
async function approveAtGate(s: Scenario, tracker: Tracker, step: Step, t0: number, notes: string[], broken: (v: string) => void): Promise<void> {
  const at = () => `+${Math.round((Date.now() - t0) / 1000)}s`;
  const seen = await waitFor(
    'the upgrade waiting for approval',
    async () => {
      const st = tracker.cluster()?.status;
      if (st?.operation?.gate === 'approved') return { asked: st.message ?? '' };
      const lo = st?.lastOperation;
      if (!st?.operation && lo?.type === step.type && Date.parse(lo.startedAt ?? '') >= t0 - 2000) return { asked: null };
      return undefined;
    },
    600_000,
  ).catch(() => ({ asked: null }));
  const asked = seen.asked;
  if (asked === null) {
    // No wait for approval: no pod may have been stopped while it led (a fault can move leadership
    // to a pod already on the new version, and then no restart of a leader is left to approve).
    await sleep(1500);
    const stops = tracker.podDeletions.filter((d) => d.at >= t0 - 2000 && /^queen-\d+$/.test(d.pod));
    const led = stops.filter((d) => d.led === true);
    const lo = tracker.cluster()?.status?.lastOperation;
    for (const d of led) broken(`${d.pod} was stopped while it led, and the upgrade never waited for approval (spec.upgrade.approval Manual)`);
    // A pod whose broker did not answer when it was stopped was down (a fault's), leading nothing.
    const said = stops.map((d) => `${d.pod} ${d.led === false ? 'a follower' : d.led === null ? 'not answering' : 'the leader'}`);
    notes.push(`${at()} no wait for approval (${lo?.result ?? 'no end'}); stopped: ${said.join(', ') || 'none'}`);
    return;
  }
  notes.push(`${at()} waits for approval: ${asked}`);
  if (!asked.includes(`${ANNOTATIONS.approve}=${step.version}`)) broken(`the wait for approval does not say the command that approves ${step.version}: ${asked}`);
  await sleep(5000);
  await untilAnswered(() => annotate(s, { [ANNOTATIONS.approve]: step.version! }));
  notes.push(`${at()} approved`);
}

/**
 * Waits for the operation of `type` begun after `since` to end, or to be Blocked for 3 minutes (it
 * asks for a person), or the time to be up; its outcome in words.
 */
async function awaitOperation(s: Scenario, type: string, since: number, timeoutMs: number): Promise<{ outcome: string; finishedAt: number | null }> {
  const deadline = Date.now() + timeoutMs;
  let last: QueenCluster | null = null;
  let blockedSince: number | null = null;
  for (;;) {
    try {
      last = await getCluster(s);
      const lo = last.status?.lastOperation;
      if (lo && lo.type === type && Date.parse(lo.startedAt ?? '') >= since - 2000 && !last.status?.operation) {
        const finishedAt = Date.parse(lo.finishedAt ?? '') || Date.now();
        return { outcome: lo.result === 'Succeeded' ? 'finished' : `${lo.result}: ${lo.message}`, finishedAt };
      }
      // Blocked for 3 minutes (longer than any fault of the soak lasts): a person is asked for.
      if (last.status?.phase === 'Blocked') {
        blockedSince ??= Date.now();
        if (Date.now() - blockedSince > 180_000) return { outcome: `blocked: ${last.status.message}`, finishedAt: null };
      } else blockedSince = null;
    } catch {
      // the API server may be away (a fault)
    }
    if (Date.now() > deadline) return { outcome: `no end within ${Math.round(timeoutMs / 60_000)} min: ${last ? row(last) : 'no status'}`, finishedAt: null };
    await sleep(1000);
  }
}
