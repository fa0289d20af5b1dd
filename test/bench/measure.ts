// What the benchmarks share: what the test bed shows while an operation runs, sampled from the
// outside (the pods, the claims and the StatefulSets from the API server every 50 ms, the
// QueenCluster through a watch, the leader's membership view through the broker's HTTP API every
// 100 ms), the Temporal history of the run, and the table and JSON rows each benchmark prints.
// Nothing here is asserted: timings depend on the machine.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { DEFAULT_SETTINGS } from '../../activities/settings.ts';
import { followMembership, type ChangeTime, type MembershipLog } from '../chaos/membership.ts';
import { getCluster, patchSpec, sleep, voterIps, type Scenario } from '../e2e/harness.ts';
import { eventTimeMs, heldSteps, historyEvents } from '../e2e/temporal.ts';
import { Informer, Kube, type KObject } from '../testbed/kube.ts';
import { authOf, verifyAcknowledged, type Load } from '../testbed/load.ts';
import type { QueenClusterSpec } from '../../crd/schema.ts';

/** The rate every benchmark pushes at while its operation runs (issue 14). */
export const BENCH_RATE = 200;

const POLL_MS = 50;
const MEMBERSHIP_POLL_MS = 100;

/** One pod of a name, as long as it had one UID: when it was seen, stopped, started, Ready, gone. */
export interface Incarnation {
  uid: string;
  seenAt: number;
  createdAt: number;
  deletingAt?: number;
  /** Its container's process ran (state running), first seen: it held its volume. */
  runningAt?: number;
  /** Its container started (the startup probe passed), first seen. */
  startedAt?: number;
  readyAt?: number;
  /** First seen labelled queenmq.com/serving=false: the operator began to drain it. */
  drainAt?: number;
  goneAt?: number;
  /** The container's restarts (an exit 75 after a snapshot counts one). */
  restarts: number;
}

/** A claim's sizes as they changed: its request, its capacity, and whether its file system waits. */
export interface ClaimSample {
  at: number;
  request: string;
  capacity: string;
  pending: boolean;
}

/** A member in the leader's view, each time its voter flag, its liveness or its lag's kind (unknown, beyond or within the promotion limit) changed. */
export interface MemberSample {
  at: number;
  voter: boolean;
  live: boolean;
  lag: number | null;
}

export interface Recorder {
  /** Per pod name, its UIDs in order. */
  pods: Map<string, Incarnation[]>;
  claims: Map<string, ClaimSample[]>;
  statefulSets: Incarnation[];
  /** Per node id, its samples in the leader's view; absent from the view: a sample with voter false, live false, lag null is not written, the gap shows as `gone`. */
  members: Map<number, (MemberSample | { at: number; gone: true })[]>;
  /** The leader in the leader's view, each time it changed. */
  leaders: { at: number; leader: number | null }[];
  promoteMaxLag: number;
  /** When each run of the cluster's operations first showed in status.operation (the watch). */
  operationSeen: Map<string, { at: number; type: string }>;
  /** The brokers' Raft logs, read from their volumes (with `raft`), and their last index when the recording began. */
  raft: MembershipLog | null;
  raftBefore: number;
  /** Resolves once the watch has listed the cluster: a change made after it is seen. */
  ready: Promise<void>;
  stop(): Promise<void>;
}

const isReady = (p: KObject) => !!p.status?.conditions?.some((c: { type: string; status: string }) => c.type === 'Ready' && c.status === 'True');
const ms = (t: unknown) => (t ? Date.parse(String(t)) : NaN);

/**
 * Starts sampling: the pods every 50 ms; the claims and the StatefulSets too with `volumes`; the
 * leader's membership view every 100 ms with `membership`; the QueenCluster always, through a watch.
 */
export function record(s: Scenario, opts: { volumes?: boolean; membership?: boolean; raft?: boolean } = {}, name = 'queen'): Recorder {
  const kube = new Kube(authOf(s.kc));
  const rec: Recorder = {
    pods: new Map(),
    claims: new Map(),
    statefulSets: [],
    members: new Map(),
    leaders: [],
    promoteMaxLag: 1000,
    operationSeen: new Map(),
    raft: null,
    raftBefore: 0,
    ready: Promise.resolve(),
    stop: async () => undefined,
  };
  let running = true;
  let podIps: string[] = [];

  const track = (list: Incarnation[], o: KObject, now: number, pod: boolean) => {
    let inc = list.find((i) => i.uid === o.metadata.uid);
    if (!inc) {
      for (const old of list) old.goneAt ??= now;
      inc = { uid: o.metadata.uid!, seenAt: now, createdAt: ms(o.metadata.creationTimestamp), restarts: 0 };
      list.push(inc);
    }
    if (o.metadata.deletionTimestamp) inc.deletingAt ??= now;
    if (pod) {
      const c = (o.status?.containerStatuses ?? [])[0];
      if (c?.state?.running) inc.runningAt ??= now;
      if (c?.started) inc.startedAt ??= now;
      inc.restarts = Math.max(inc.restarts, c?.restartCount ?? 0);
      if (isReady(o) && !o.metadata.deletionTimestamp) inc.readyAt ??= now;
      if (o.metadata.labels?.['queenmq.com/serving'] === 'false') inc.drainAt ??= now;
    }
  };
  const gone = (map: Map<string, Incarnation[]> | Incarnation[], present: Set<string>, now: number) => {
    const lists = Array.isArray(map) ? [map] : [...map.values()];
    for (const l of lists) for (const i of l) if (!present.has(i.uid)) i.goneAt ??= now;
  };

  const objects = (async () => {
    while (running) {
      try {
        const now = Date.now();
        const selector = `app.kubernetes.io/instance=${name}`;
        const [podList, claimList, stsList] = await Promise.all([
          kube.get<{ items: KObject[] }>(`/api/v1/namespaces/${s.ns}/pods`, { query: { labelSelector: selector } }),
          opts.volumes ? kube.get<{ items: KObject[] }>(`/api/v1/namespaces/${s.ns}/persistentvolumeclaims`) : null,
          opts.volumes ? kube.get<{ items: KObject[] }>(`/apis/apps/v1/namespaces/${s.ns}/statefulsets`) : null,
        ]);
        const present = new Set<string>();
        for (const p of podList.items) {
          const n = p.metadata.name;
          if (!rec.pods.has(n)) rec.pods.set(n, []);
          track(rec.pods.get(n)!, p, now, true);
          present.add(p.metadata.uid!);
        }
        gone(rec.pods, present, now);
        podIps = podList.items.filter((p) => p.status?.podIP && !p.metadata.deletionTimestamp).map((p) => p.status.podIP as string);
        for (const c of claimList?.items ?? []) {
          const sample: ClaimSample = {
            at: now,
            request: String(c.spec?.resources?.requests?.storage ?? ''),
            capacity: String(c.status?.capacity?.storage ?? ''),
            pending: !!c.status?.conditions?.some((x: { type: string }) => x.type === 'FileSystemResizePending'),
          };
          const l = rec.claims.get(c.metadata.name) ?? [];
          const last = l.at(-1);
          if (!last || last.request !== sample.request || last.capacity !== sample.capacity || last.pending !== sample.pending) l.push(sample);
          rec.claims.set(c.metadata.name, l);
        }
        if (stsList) {
          const here = new Set<string>();
          for (const o of stsList.items.filter((x) => x.metadata.name === name)) {
            track(rec.statefulSets, o, now, false);
            here.add(o.metadata.uid!);
          }
          gone(rec.statefulSets, here, now);
        }
      } catch {
        // one sample lost
      }
      await sleep(POLL_MS);
    }
  })();

  // The leader's view, from any pod that answers (a follower relays the leader's view verbatim).
  let prefer = null as string | null;
  const membership = (async () => {
    while (running && opts.membership) {
      const started = Date.now();
      const ips: string[] = prefer && podIps.includes(prefer) ? [prefer, ...podIps.filter((i) => i !== prefer)] : podIps;
      for (const ip of ips) {
        try {
          const res = await request(`http://${ip}:6632/api/v1/system/raft/membership?timeoutMs=1000`, { headersTimeout: 1000, bodyTimeout: 1000 });
          const body = (await res.body.json()) as {
            membership?: { source?: string; leader?: number | null; promoteMaxLag?: number; members?: { nodeId: number; voter: boolean; live: boolean; lag: number | null }[] };
          };
          const m = body.membership;
          if (res.statusCode !== 200 || m?.source !== 'leader') continue;
          const now = Date.now();
          if (rec.leaders.at(-1)?.leader !== (m.leader ?? null)) rec.leaders.push({ at: now, leader: m.leader ?? null });
          rec.promoteMaxLag = m.promoteMaxLag ?? rec.promoteMaxLag;
          const seen = new Set<number>();
          for (const x of m.members ?? []) {
            seen.add(x.nodeId);
            const l = rec.members.get(x.nodeId) ?? [];
            // A sample only when what a catch-up is read from changes: voter, live, lag unknown,
            // beyond or within the promotion limit.
            const last = l.at(-1);
            const kind = (v: { lag: number | null }) => (v.lag === null ? 'unknown' : v.lag <= rec.promoteMaxLag ? 'within' : 'beyond');
            if (!last || 'gone' in last || last.voter !== x.voter || last.live !== x.live || kind(last) !== kind(x)) l.push({ at: now, voter: x.voter, live: x.live, lag: x.lag });
            rec.members.set(x.nodeId, l);
          }
          for (const [id, l] of rec.members) if (!seen.has(id) && !('gone' in (l.at(-1) ?? {}))) l.push({ at: now, gone: true });
          prefer = ip;
          break;
        } catch {
          // that pod does not answer; the next one
        }
      }
      await sleep(Math.max(0, MEMBERSHIP_POLL_MS - (Date.now() - started)));
    }
  })();

  const qcs = new Informer<KObject>(kube, `/apis/queenmq.com/v1alpha1/namespaces/${s.ns}/queenclusters`, { query: { fieldSelector: `metadata.name=${name}` } });
  const note = (o: KObject) => {
    const op = o.status?.operation;
    if (op?.runId && !rec.operationSeen.has(op.runId)) rec.operationSeen.set(op.runId, { at: Date.now(), type: op.type });
  };
  qcs.on({ add: note, update: note });
  const synced = qcs.start();
  // The brokers' Raft logs (their configuration entries carry the leader's clock): each membership
  // change's own time, which no floor counts and the overhead leaves out.
  const raft = opts.raft
    ? followMembership(s.ns, name, 500).then((log) => {
        rec.raft = log;
        rec.raftBefore = log.lastIndex();
      })
    : Promise.resolve();
  rec.ready = Promise.all([synced, raft]).then(() => undefined);

  rec.stop = async () => {
    running = false;
    qcs.stop();
    if (rec.raft) {
      await rec.raft.poll();
      rec.raft.stop();
    }
    await Promise.all([objects, membership]);
    await kube.close();
  };
  return rec;
}

// ---- reading what was recorded ---------------------------------------------------------------

/** The pod's incarnations whose UID first showed at or after `since` (its successors). */
export function successors(rec: Recorder, pod: string, since: number): Incarnation[] {
  return (rec.pods.get(pod) ?? []).filter((i) => i.seenAt >= since);
}

/** The pod's incarnation that ran at `at` (seen by then, not gone). */
export function incarnationAt(rec: Recorder, pod: string, at: number): Incarnation | undefined {
  return (rec.pods.get(pod) ?? []).find((i) => i.seenAt <= at && (i.goneAt === undefined || i.goneAt > at));
}

/**
 * Each restart of the pods after `since`: from the moment the old pod was seen stopping (its
 * deletion timestamp) to its successor Ready (or started, with `until: 'started'`).
 */
export function restarts(rec: Recorder, since: number, until: 'ready' | 'started' = 'ready'): { pod: string; from: number; to: number }[] {
  const out: { pod: string; from: number; to: number }[] = [];
  for (const [pod, list] of rec.pods) {
    for (let i = 1; i < list.length; i++) {
      const old = list[i - 1]!;
      const next = list[i]!;
      if (next.seenAt < since) continue;
      const from = old.deletingAt ?? next.seenAt;
      const to = until === 'ready' ? next.readyAt : next.startedAt;
      if (to !== undefined) out.push({ pod, from, to });
    }
  }
  return out.sort((a, b) => a.from - b.from);
}

/**
 * The drains after `since` (not in any floor): each pod the operator took out of the client
 * Service, from its serving label first seen false until it was seen stopping or its node left
 * the leader's membership view, whichever came first.
 */
export function drains(rec: Recorder, since: number): { pod: string; from: number; ms: number }[] {
  const out: { pod: string; from: number; ms: number }[] = [];
  for (const [pod, list] of rec.pods) {
    const id = Number(pod.split('-').at(-1)) + 1;
    for (const i of list) {
      if (i.drainAt === undefined || i.drainAt < since) continue;
      const left = leftView(rec, id, i.drainAt);
      const end = [i.deletingAt, i.goneAt, left ?? undefined].filter((x): x is number => x !== undefined).sort((a, b) => a - b)[0];
      if (end !== undefined) out.push({ pod, from: i.drainAt, ms: end - i.drainAt });
    }
  }
  return out;
}

/** The time some pod was draining after `since`: drains side by side (a scale-down's) count once. */
export function drainTime(rec: Recorder, since: number): number {
  const spans = drains(rec, since)
    .map((d) => [d.from, d.from + d.ms] as const)
    .sort((a, b) => a[0] - b[0]);
  let total = 0;
  let end = -Infinity;
  for (const [from, to] of spans) {
    if (to <= end) continue;
    total += to - Math.max(from, end);
    end = to;
  }
  return total;
}

/**
 * A learner's catch-up in the leader's view after `since`: from the first sample that shows node
 * `id` as a learner to the first that shows it live within the broker's promotion limit
 * (promoteMaxLag, 1000 entries by default) — what the promotion waits for.
 */
export function catchUp(rec: Recorder, id: number, since: number): { from: number; to: number } | null {
  const l = (rec.members.get(id) ?? []).filter((x) => x.at >= since);
  const i = l.findIndex((x) => !('gone' in x) && !x.voter);
  if (i < 0) return null;
  const from = l[i]!.at;
  const done = l.slice(i).find((x) => !('gone' in x) && ((x.live && x.lag !== null && x.lag <= rec.promoteMaxLag) || x.voter));
  return done ? { from, to: done.at } : null;
}

/** When a node other than `id` first led after `since`, in the leader's view. */
export function otherLeader(rec: Recorder, id: number, since: number): number | null {
  return rec.leaders.find((x) => x.at >= since && x.leader !== null && x.leader !== id)?.at ?? null;
}

/** When node `id` left the leader's view after `since`. */
export function leftView(rec: Recorder, id: number, since: number): number | null {
  return (rec.members.get(id) ?? []).find((x) => x.at >= since && 'gone' in x)?.at ?? null;
}

/** A claim's growth after `since`: from its request first at `size` to its capacity at `size`; `pendingAt` when its file system first waited for its pod. */
export function claimGrowth(rec: Recorder, claim: string, size: string, since: number): { requested: number; pendingAt: number | null; grown: number } | null {
  const l = (rec.claims.get(claim) ?? []).filter((x) => x.at >= since);
  const requested = l.find((x) => x.request === size)?.at;
  const grown = l.find((x) => x.capacity === size)?.at;
  if (requested === undefined || grown === undefined) return null;
  return { requested, pendingAt: l.find((x) => x.pending)?.at ?? null, grown };
}

// ---- the operation and its history -------------------------------------------------------------

export interface RunFigures {
  runId: string;
  type: string;
  /** From the change to status.lastOperation.finishedAt of the run. */
  totalMs: number;
  /** From the change to status.operation of the run first seen through the watch. */
  firstStepWatchMs: number | null;
  /** From the change to the start of the run's first activity (beginOperation), from its history. */
  firstStepHistoryMs: number | null;
  events: number;
  activities: number;
  result: string;
}

/**
 * Waits for the first operation of `type` that started after `since` to end (status.lastOperation
 * of its run), then reads its history: events, activities scheduled, its first activity's start.
 */
export async function operationRun(s: Scenario, rec: Recorder, type: string, since: number, timeoutMs = 900_000): Promise<RunFigures> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const seen = [...rec.operationSeen].find(([, v]) => v.at >= since && v.type === type);
    const qc = await getCluster(s).catch(() => null);
    const lo = qc?.status?.lastOperation;
    last = `${qc?.status?.phase}: ${qc?.status?.message}`;
    if (seen && lo?.runId === seen[0] && lo.finishedAt && !qc?.status?.operation) {
      const [runId, v] = seen;
      const events = await historyEvents(s, { workflowId: `queencluster/${s.ns}/queen`, runId });
      const started = events.find((e) => e.activityTaskStartedEventAttributes);
      const activities = events.filter((e) => e.activityTaskScheduledEventAttributes).length;
      return {
        runId,
        type,
        totalMs: Date.parse(lo.finishedAt) - since,
        firstStepWatchMs: v.at - since,
        firstStepHistoryMs: started ? eventTimeMs(started.eventTime) - since : null,
        events: events.length,
        activities,
        result: lo.result,
      };
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for the ${type} run to end; last seen: ${last}`);
    await sleep(200);
  }
}

/** Applies a spec change; returns the moment it was sent (what every figure counts from). */
export async function change(s: Scenario, spec: Partial<QueenClusterSpec>): Promise<number> {
  const at = Date.now();
  await patchSpec(s, spec);
  return at;
}

export interface Pushes {
  pushes: number;
  failed: number;
  firstTry: number;
  unanswered: number;
  lost: number;
}

/** Stops the load and counts what the client saw: pushes acknowledged, failed attempts, acknowledged messages missing from a voter. */
export async function pushesOf(s: Scenario, load: Load): Promise<Pushes> {
  const r = await load.stop();
  const lost = (await verifyAcknowledged(r, await voterIps(s))).length;
  for (const f of r.failedAttempts.slice(0, 10)) console.log(`  failed push: ${JSON.stringify(f)}`);
  return { pushes: r.acknowledged, failed: r.failedAttempts.length, firstTry: r.acknowledgedFirstTry, unanswered: r.unacknowledged.length, lost };
}

// ---- the operator's overhead ---------------------------------------------------------------------

/**
 * What an operation spent beyond its floor that is the operator's: its total, less the floor, less
 * the waits it was configured to run (--drain-wait for each drain that ran in series with the
 * steps, and minReadySeconds where the floor does not count it), less the membership changes' own
 * times as the leader's Raft log tells them. The goal: at most 1 s, or 10% of the floor if that is
 * more.
 */
export interface Overhead {
  /** The drains that ran in series (a step held by requests-drained; a drain in the last seconds of a minReadySeconds wait runs beside the floor). */
  drains: number;
  drainWaitMs: number;
  /** minReadySeconds that held the steps beyond what the floor counts. */
  minReadyMs: number;
  /** Each membership change, with its own time. */
  changes: ChangeTime[];
  overheadMs: number;
  goalMs: number;
}

/** A step of a run as its history has it, in seconds from the change: scheduled, started, ended, and the gates that held it. */
export interface StepTime {
  step: string;
  type: string;
  scheduled: number;
  started: number | null;
  ended: number | null;
  held: string;
}

/** The steps of a run from its history, in seconds from `since`: where an operation's time went. */
export async function stepTimes(s: Scenario, run: RunFigures, since: number): Promise<StepTime[]> {
  const events = await historyEvents(s, { workflowId: `queencluster/${s.ns}/queen`, runId: run.runId });
  const text = (p: { data?: Uint8Array | null } | null | undefined) => (p?.data?.length ? JSON.parse(Buffer.from(p.data).toString('utf8')) : undefined);
  const rel = (e: { eventTime?: { seconds?: unknown; nanos?: unknown } | null }) => Math.round(eventTimeMs(e.eventTime) - since) / 1000;
  const steps = new Map<string, StepTime>();
  for (const e of events) {
    const a = e.activityTaskScheduledEventAttributes;
    if (a) steps.set(String(e.eventId), { step: String(text(e.userMetadata?.summary) ?? ''), type: a.activityType?.name ?? '', scheduled: rel(e), started: null, ended: null, held: '' });
    const st = e.activityTaskStartedEventAttributes;
    if (st) steps.get(String(st.scheduledEventId))!.started = rel(e);
    const done = e.activityTaskCompletedEventAttributes;
    if (done) {
      const step = steps.get(String(done.scheduledEventId))!;
      step.ended = rel(e);
      step.held = (text(done.result?.payloads?.[0]) as { held?: string } | undefined)?.held ?? '';
    }
  }
  return [...steps.values()];
}

/** "0.2–0.4 beginOperation; 0.5–3.4 removeNode (requests-drained 2.0 s) ...": a run's steps on one line. */
export const stepsText = (steps: StepTime[]) =>
  steps.map((x) => `${x.started ?? x.scheduled}–${x.ended ?? '?'} ${x.type}${x.held ? ` (${x.held})` : ''}`).join('; ');

/** The steps whose drain runs beside a minReadySeconds wait the floor counts (drainAhead). */
const DRAINS_AHEAD = ['awaitNextRestart', 'awaitStopGate'];

/** The membership in the leader's view at `at` (the recorder's samples), for the first change a purged log no longer explains. */
function membershipAt(rec: Recorder, at: number): { voters: number[]; learners: number[] } | undefined {
  const voters: number[] = [];
  const learners: number[] = [];
  for (const [id, samples] of rec.members) {
    const last = samples.filter((x) => x.at <= at).at(-1);
    if (!last || 'gone' in last) continue;
    (last.voter ? voters : learners).push(id);
  }
  return voters.length ? { voters: voters.sort((a, b) => a - b), learners: learners.sort((a, b) => a - b) } : undefined;
}

export async function overheadOf(s: Scenario, rec: Recorder, run: RunFigures, row: { totalMs: number; floorMs: number; floorMinReadyMs?: number; since: number }): Promise<Overhead> {
  const steps = await heldSteps(s, { workflowId: `queencluster/${s.ns}/queen`, runId: run.runId });
  const drainWaitMs = DEFAULT_SETTINGS.drainMs;
  const drains = steps.filter((st) => st.held.includes('requests-drained') && !DRAINS_AHEAD.includes(st.type)).length;
  const minReadyHeld = steps.reduce((t, st) => t + (st.heldMs['pod-ready-for-min-ready-seconds'] ?? 0), 0);
  const minReadyMs = Math.max(0, minReadyHeld - (row.floorMinReadyMs ?? 0));
  const changes = rec.raft ? rec.raft.changeTimes(rec.raftBefore, membershipAt(rec, row.since)) : [];
  const changesMs = changes.reduce((t, c) => t + (c.ms ?? 0), 0);
  return {
    drains,
    drainWaitMs,
    minReadyMs,
    changes,
    overheadMs: row.totalMs - row.floorMs - drains * drainWaitMs - minReadyMs - changesMs,
    goalMs: Math.max(1000, row.floorMs * 0.1),
  };
}

/** The overhead in words, what it is made of, and whether it meets its goal. */
function overheadText(r: Row): string {
  const o = r.overhead!;
  const changesMs = o.changes.reduce((t, c) => t + (c.ms ?? 0), 0);
  const parts = [
    `total ${sec(r.totalMs)}`,
    `floor ${sec(r.floorMs)}`,
    ...(o.drains ? [`${o.drains} drain wait${o.drains > 1 ? 's' : ''} × ${sec(o.drainWaitMs)}`] : []),
    ...(o.minReadyMs ? [`minReadySeconds outside the floor ${sec(o.minReadyMs)}`] : []),
    `the membership changes ${(changesMs / 1000).toFixed(2)}s (${o.changes.map((c) => `${c.changes.join(' and ')} ${c.ms === null ? '?' : `${Math.round(c.ms)} ms`}`).join(', ') || 'none'})`,
  ];
  return `${r.operation}: overhead ${sec(o.overheadMs)} = ${parts.join(' − ')}; goal at most ${sec(o.goalMs)} (1 s, or 10% of the floor): ${o.overheadMs <= o.goalMs ? 'met' : 'not met'}`;
}

// ---- the table -------------------------------------------------------------------------------

export interface Row {
  operation: string;
  totalMs: number;
  floorMs: number;
  /** What the floor is made of, in ms, by name. */
  floorParts: Record<string, number>;
  pushes: Pushes;
  run: RunFigures;
  /** The drains' time (see drains()), outside the floor: the operator's deliberate waits for the clients. */
  drainMs?: number;
  /** The operator's overhead (overheadOf). */
  overhead?: Overhead;
  /** The run's steps from its history (stepTimes). */
  steps?: StepTime[];
  notes?: string;
  /** What was seen, in seconds from the change (JSON only): see timeline(). */
  timeline?: Record<string, unknown>;
}

/** The pods' incarnations and the members' changes in the leader's view, in seconds from `since`: what a floor was read from. */
export function timeline(rec: Recorder, since: number): Record<string, unknown> {
  const rel = (t: number | undefined) => (t === undefined ? undefined : Math.round(t - since) / 1000);
  const pods = Object.fromEntries(
    [...rec.pods].map(([name, list]) => [
      name,
      list.map((i) => ({ uid: i.uid.slice(0, 8), seen: rel(i.seenAt), drain: rel(i.drainAt), deleting: rel(i.deletingAt), started: rel(i.startedAt), ready: rel(i.readyAt), gone: rel(i.goneAt), restarts: i.restarts })),
    ]),
  );
  const members = Object.fromEntries([...rec.members].map(([id, l]) => [id, l.filter((x) => x.at >= since - 1000).map((x) => ({ ...x, at: rel(x.at) }))]));
  const claims = Object.fromEntries([...rec.claims].map(([name, l]) => [name, l.map((x) => ({ ...x, at: rel(x.at) }))]));
  const statefulSets = rec.statefulSets.map((i) => ({ uid: i.uid.slice(0, 8), seen: rel(i.seenAt), deleting: rel(i.deletingAt), gone: rel(i.goneAt) }));
  return { pods, members, ...(rec.claims.size ? { claims, statefulSets } : {}) };
}

export const median = (xs: number[]) => {
  const v = [...xs].sort((a, b) => a - b);
  if (!v.length) return NaN;
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
};

const sec = (x: number) => `${(x / 1000).toFixed(1)}s`;
const msText = (x: number | null) => (x === null || Number.isNaN(x) ? '—' : `${Math.round(x)} ms`);

/** The commit the benchmark runs on, and whether files were changed and not committed: a figure names it. */
export function commitText(): string {
  const git = (...args: string[]) => {
    try {
      return execFileSync('git', args, { cwd: fileURLToPath(new URL('../..', import.meta.url)), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return '';
    }
  };
  const commit = git('rev-parse', '--short=12', 'HEAD');
  if (!commit) return 'no git checkout';
  return `commit ${commit}${git('status', '--porcelain', '--untracked-files=no') ? ' with uncommitted changes' : ''}`;
}

/** Prints the rows as a table (with the goals) and writes them as JSON to .cache/bench-<name>-<time>.json. */
export function report(name: string, rows: Row[]): string {
  const commit = commitText();
  const header = ['operation', 'total', 'floor', 'ratio', 'overhead (goal)', 'failed pushes / pushes', 'lost', 'history events / step', 'first step: watch / history'];
  const cells = rows.map((r) => [
    r.operation,
    sec(r.totalMs),
    sec(r.floorMs),
    (r.totalMs / r.floorMs).toFixed(2),
    r.overhead ? `${sec(r.overhead.overheadMs)} (${sec(r.overhead.goalMs)})` : '—',
    `${r.pushes.failed} / ${r.pushes.pushes}`,
    String(r.pushes.lost),
    `${r.run.events} / ${r.run.activities} = ${(r.run.events / r.run.activities).toFixed(1)}`,
    `${msText(r.run.firstStepWatchMs)} / ${msText(r.run.firstStepHistoryMs)}`,
  ]);
  const width = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((x, i) => (i === 0 ? x.padEnd(width[i]!) : x.padStart(width[i]!))).join('  ');
  const watch = median(rows.map((r) => r.run.firstStepWatchMs ?? NaN).filter((x) => !Number.isNaN(x)));
  const history = median(rows.map((r) => r.run.firstStepHistoryMs ?? NaN).filter((x) => !Number.isNaN(x)));
  const text = [
    `${name} benchmark on ${commit}, at ${BENCH_RATE} pushes a second (goals: ratio within 1.10, or where the floor is under 10 s an overhead of at most 1 s or 10% of the floor; 0 failed pushes; first step under 1 s at the median)`,
    line(header),
    ...cells.map(line),
    `floors: ${rows.map((r) => `${r.operation} = ${Object.entries(r.floorParts).map(([k, v]) => `${k} ${sec(v)}`).join(' + ')}`).join('; ')}`,
    ...rows
      .filter((r) => r.drainMs)
      .map((r) => `${r.operation}: the drains took ${sec(r.drainMs!)} (out of the client Service until the pod stopped or its node left; not in the floor; without them the ratio is ${((r.totalMs - r.drainMs!) / r.floorMs).toFixed(2)})`),
    ...rows.filter((r) => r.notes).map((r) => `${r.operation}: ${r.notes}`),
    ...rows.filter((r) => r.overhead).map(overheadText),
    ...rows.filter((r) => r.steps).map((r) => `${r.operation}, its steps (s from the change): ${stepsText(r.steps!)}`),
    `first step at the median: ${msText(watch)} (status.operation seen through a watch), ${msText(history)} (the run's first activity started, from its history)`,
  ].join('\n');
  console.log(text);
  const dir = fileURLToPath(new URL('../../.cache/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `bench-${name}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify({ bench: name, commit, rate: BENCH_RATE, at: new Date().toISOString(), rows }, null, 1));
  console.log(`rows written to ${file}`);
  return text;
}
