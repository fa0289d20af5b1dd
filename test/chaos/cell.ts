// One cell of the chaos matrix: an operation, run once in a namespace of its own while a fault
// happens (the operator killed right after one of its steps, the Temporal server or the API server
// killed and started again, a node that stops, a voter's pod killed, the leader killed in the middle
// of a promotion), with the load client pushing throughout. What a user would see decides the
// outcome: the operation finishes (or says what a person has to do), no pod is restarted twice for
// one target, no member added or removed twice (the configuration entries of the brokers' Raft
// logs, membership.ts), no claim deleted but the ones the operation records, never a voter stopped
// by the operator while another is down, never two voters down by its hand, no wait that says
// nothing for minutes, each step once in `kubectl describe`, nothing acknowledged lost.
//
// The operator is installed as a team installs it in one namespace (deploy/namespaced.yaml), and
// given what the cluster-wide install also grants it beyond that namespace: `get` on Nodes (a
// ClusterRole with that one rule, bound to the cell's ServiceAccount), so that it can name a pod's
// node that stopped reporting. A RoleBinding of deploy/rbac.yaml's ClusterRole grants nothing on
// Nodes, which are not namespaced.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { temporal as proto } from '@temporalio/proto';
import type { QueenCluster, QueenClusterSpec } from '../../crd/schema.ts';
import { ANNOTATIONS } from '../../crd/schema.ts';
import { applyManifest, control, kubectl } from '../testbed/client.ts';
import { startLoad, verifyAcknowledged, type Load, type LoadReport } from '../testbed/load.ts';
import {
  annotate,
  clusterEvents,
  createCluster,
  formed,
  getCluster,
  patchSpec,
  pods,
  row,
  scenario,
  seedSpec,
  sleep,
  voterIps,
  waitFor,
  waitForCluster,
  type Scenario,
} from '../e2e/harness.ts';
import { historyEvents, settledRuns, workflowRuns } from '../e2e/temporal.ts';
import { backups, requestedBackup, volumeSnapshot } from '../e2e/backups.ts';
import { requestedBackupWorkflowId } from '../../watcher/backups.ts';
import { followMembership, membershipViolations, changeKey, type MembershipLog } from './membership.ts';
import { BROKER_HTTP_PORT, track, type Tracker } from './tracker.ts';
import { readHealth } from '../../activities/broker.ts';
import { LINK_CELLS, LINK_STEP_REASONS } from './link-cells.ts';

export const OPERATIONS = [
  'FormCluster',
  'RollingUpgrade',
  'UpgradeApprovalCanary',
  'ScaleUp',
  'ScaleDown',
  'ReplaceFollower',
  'ReplaceLeader',
  'GrowVolumes',
  'GrowVolumesRestart',
] as const;
/**
 * A backup asked for by the annotation (takeBackup, beside the cluster's operations), and a cluster
 * of one voter formed from a backup (restoreCluster); a standby's promotion and a planned switchover
 * (two clusters each, link-cells.ts). Apart from OPERATIONS, which the seeded sample of `npm test`
 * draws from.
 */
export const BACKUP_OPERATIONS = ['Backup', 'Restore'] as const;
export const LINK_OPERATIONS = ['PromoteStandby', 'Switchover'] as const;
export type OperationName = (typeof OPERATIONS)[number] | (typeof BACKUP_OPERATIONS)[number] | (typeof LINK_OPERATIONS)[number];

/** The faults of item 2 of the issue: the world around the operator fails while it works. */
export const WORLD_FAULTS = ['temporal-restart', 'apiserver-restart', 'node-stop', 'voter-kill', 'leader-mid-promote'] as const;
export type WorldFault = (typeof WORLD_FAULTS)[number];

export type Fault = { kind: 'none' } | { kind: 'crash'; activityId: number } | { kind: WorldFault };

/** The faults that touch only the cell's own namespace (safe beside other tests in a shared test bed). */
export const LOCAL_FAULTS: WorldFault[] = ['voter-kill', 'leader-mid-promote'];

export const faultName = (f: Fault) => (f.kind === 'crash' ? `crash@${f.activityId}` : f.kind);

export interface CellResult {
  operation: OperationName;
  fault: string;
  /** For a crash: the step the operator was killed after ("4 restartPod"). */
  step?: string;
  /** finished | blocked: ... | no end: ... | crash point not reached */
  outcome: string;
  /** From the change that asked for the operation to its end. */
  seconds: number | null;
  pushes: number | null;
  pushesFailed: number | null;
  lost: number | null;
  /** What a user would see that breaks a promise. Empty: the cell passed. */
  violations: string[];
  /** What happened that is worth a line (a status seen, a message). */
  notes: string[];
  /** The activities of the operation's run, in order (id:type), as Temporal recorded them. */
  activities: string[];
  namespace: string;
}

export interface Ctx {
  s: Scenario;
  tracker: Tracker;
  /** The leader's node id when the operation began. */
  leader: number | null;
  /** The pod a replacement names. */
  target: string | null;
  /** Claim name → UID before the operation. */
  claimsBefore: Map<string, string>;
  /** Restore: the backup it forms from, and the source cluster's pods (name:uid) before. */
  backup?: string;
  sourcePods?: string[];
}

export type Range = [number, number];

export interface OperationDef {
  /** The workflow type in Temporal. */
  workflow: string;
  /** status.lastOperation.type. */
  type: string;
  /** The cluster the operation starts from (FormCluster: none). */
  replicas: 3 | 5;
  /** More of the spec it is formed with. */
  spec?: Partial<QueenClusterSpec>;
  /** A recorded history of this operation (test/workflows/histories), for its activity ids. */
  history: string;
  /** Before the trigger (the load client pushing, if any). */
  prepare?: (c: Ctx, load: Load | null) => Promise<void>;
  trigger: (c: Ctx) => Promise<void>;
  /** What a person does while it runs (an approval once it asks for one); ends by itself. */
  during?: (c: Ctx, began: number) => Promise<void>;
  voters: number[];
  /** How many UIDs each pod has from the trigger to the end (a restart makes one more). */
  uids: (c: Ctx) => Record<string, Range>;
  /** The claims (names) the operation may delete; their UIDs are taken before it begins. */
  claimsDeleted: (c: Ctx) => string[];
  /** How many Events of each step reason `kubectl describe` lists. */
  events: (c: Ctx) => Record<string, Range>;
  /** The membership changes the operation makes, each once (`learner 4`, `promote 4`, `remove 2`). */
  members: (c: Ctx) => string[];
  /** What runs before, instead of forming the cluster `queen` and starting the load. */
  setup?: (c: Ctx) => Promise<void>;
  /** The workflow id of its run, when it is not the cluster's operation id. */
  workflowId?: (c: Ctx) => Promise<string>;
  /** Its end, when it is not the cluster's status.lastOperation. */
  awaitEnd?: (c: Ctx, began: number, timeoutMs: number) => Promise<{ outcome: string; finishedAt: number | null }>;
  /** What a user sees of it once it ended, beyond the voters, pods, claims and Events. */
  check?: (c: Ctx, result: CellResult) => Promise<void>;
  /**
   * The cluster under test (`queen`) as it is before the trigger, when not a plain formed one: a
   * standby of a source (link-cells.ts). Its load client (the Services it pushes through) with it.
   */
  cluster?: (s: Scenario) => Promise<{ qc: QueenCluster; service: string | string[] }>;
}

/** The node id of a pod `queen-N`. */
const nodeOf = (pod: string | null) => Number(pod!.split('-').at(-1)) + 1;
const replaced = (c: Ctx) => [`remove ${nodeOf(c.target)}`, `learner ${nodeOf(c.target)}`, `promote ${nodeOf(c.target)}`];

export const once: Range = [1, 1];
export const each = (n: number, r: Range) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`queen-${i}`, r]));

export const DEFS: Record<OperationName, OperationDef> = {
  FormCluster: {
    workflow: 'formCluster',
    type: 'FormCluster',
    replicas: 3,
    history: 'formCluster',
    trigger: async (c) => void (await createCluster(c.s, seedSpec())),
    voters: [1, 2, 3],
    uids: () => each(3, once),
    claimsDeleted: () => [],
    events: () => ({ FormClusterStarted: once, ApplyObjects: once, LeaderElected: once, VotersLive: once, WriteCommitted: once, FormClusterSucceeded: once }),
    members: () => [],
  },
  RollingUpgrade: {
    workflow: 'rollingUpgrade',
    type: 'RollingUpgrade',
    replicas: 3,
    history: 'rollingUpgrade-3-voters',
    trigger: (c) => patchSpec(c.s, { version: '2.6.1' }),
    voters: [1, 2, 3],
    uids: () => each(3, [2, 2]),
    claimsDeleted: () => [],
    events: () => ({ RollingUpgradeStarted: once, UpdateTemplate: once, RestartPod: [3, 3], RollingUpgradeSucceeded: once }),
    members: () => [],
  },
  // An upgrade that waits for a person twice: its canary soaks (the waits of the machine), and the
  // leader waits for an approval, parked in the workflow, which a person gives once it is asked.
  UpgradeApprovalCanary: {
    workflow: 'rollingUpgrade',
    type: 'RollingUpgrade',
    replicas: 3,
    spec: { upgrade: { approval: 'Manual', canarySeconds: 15 } },
    history: 'rollingUpgrade-approval-canary',
    trigger: (c) => patchSpec(c.s, { version: '2.6.1' }),
    during: async (c, began) => {
      const asked = await waitFor(
        'the upgrade asking for an approval, or its end',
        async () => {
          const st = (await getCluster(c.s)).status;
          if (st?.operation?.gate === 'approved') return 'asked';
          return st?.lastOperation && Date.parse(st.lastOperation.startedAt ?? '') >= began - 2000 && !st.operation ? 'ended' : undefined;
        },
        15 * 60_000,
      );
      if (asked === 'asked') await annotate(c.s, { [ANNOTATIONS.approve]: '2.6.1' });
    },
    voters: [1, 2, 3],
    uids: () => each(3, [2, 2]),
    claimsDeleted: () => [],
    events: () => ({ RollingUpgradeStarted: once, UpdateTemplate: once, RestartPod: [3, 3], Canary: once, CanaryPassed: once, RollingUpgradeSucceeded: once }),
    members: () => [],
  },
  ScaleUp: {
    workflow: 'scaleVoters',
    type: 'ScaleVoters',
    replicas: 3,
    history: 'scaleVoters-up',
    trigger: (c) => patchSpec(c.s, { replicas: 5 }),
    voters: [1, 2, 3, 4, 5],
    uids: () => each(5, once),
    claimsDeleted: () => [],
    events: () => ({ ScaleVotersStarted: once, ScalePods: once, AddLearner: [2, 2], Promote: once, ScaleVotersSucceeded: once }),
    members: () => ['learner 4', 'learner 5', 'promote 4', 'promote 5'],
  },
  ScaleDown: {
    workflow: 'scaleVoters',
    type: 'ScaleVoters',
    replicas: 5,
    history: 'scaleVoters-down',
    // Which node leads decides the steps: one that leaves hands leadership away first (three steps
    // more, and a node that takes it over and leaves too, three more again). The matrix crashes the
    // operator after each step of a run without a fault, so every run starts with node 4 leading:
    // node 5 leaves, node 4 hands leadership to a node that stays (the only other voters), leaves.
    prepare: async (c) => void (c.leader = await leadershipTo(c.s, 4, [1, 2, 3])),
    trigger: (c) => patchSpec(c.s, { replicas: 3 }),
    voters: [1, 2, 3],
    // A node that leads is stopped once, so it hands leadership away before it leaves.
    uids: () => ({ ...each(3, once), 'queen-3': [1, 2], 'queen-4': [1, 2] }),
    claimsDeleted: () => ['data-queen-3', 'data-queen-4'],
    events: () => ({ ScaleVotersStarted: once, RemoveMember: [2, 2], ScalePods: once, DeleteClaim: [2, 2], RestartPod: [0, 2], ScaleVotersSucceeded: once }),
    members: () => ['remove 4', 'remove 5'],
  },
  ReplaceFollower: {
    workflow: 'replaceNode',
    type: 'ReplaceNode',
    replicas: 3,
    history: 'replaceNode',
    prepare: async (c) => {
      const follower = [3, 2, 1].find((id) => id !== c.leader)!;
      c.target = `queen-${follower - 1}`;
    },
    trigger: (c) => annotate(c.s, { [ANNOTATIONS.replacePod]: c.target }),
    voters: [1, 2, 3],
    uids: (c) => ({ ...each(3, once), [c.target!]: [2, 2] }),
    claimsDeleted: (c) => [`data-${c.target}`],
    events: () => ({ ReplaceNodeStarted: once, ReplaceStarted: once, RemoveMember: once, WipeVolume: once, AddLearner: once, Promote: once, ReplaceFinished: once, ReplaceNodeSucceeded: once }),
    members: replaced,
  },
  ReplaceLeader: {
    workflow: 'replaceNode',
    type: 'ReplaceNode',
    replicas: 3,
    history: 'replaceNode-leader',
    prepare: async (c) => {
      c.target = `queen-${c.leader! - 1}`;
    },
    trigger: (c) => annotate(c.s, { [ANNOTATIONS.replacePod]: c.target }),
    voters: [1, 2, 3],
    // Stopped once to hand leadership away, then again with its volume. The hand-off ends once
    // another node leads, before the pod is gone: when the old volume goes before the StatefulSet
    // made a successor on it, the one successor has the new volume (2 UIDs, not 3). That no pod
    // on the new volume is stopped is checked apart (checkAfter).
    uids: (c) => ({ ...each(3, once), [c.target!]: [2, 3] }),
    claimsDeleted: (c) => [`data-${c.target}`],
    events: () => ({
      ReplaceNodeStarted: once,
      ReplaceStarted: once,
      RestartPod: once,
      RemoveMember: once,
      WipeVolume: once,
      AddLearner: once,
      Promote: once,
      ReplaceFinished: once,
      ReplaceNodeSucceeded: once,
    }),
    members: replaced,
  },
  GrowVolumes: {
    workflow: 'growVolumes',
    type: 'GrowVolumes',
    replicas: 3,
    history: 'growVolumes',
    trigger: (c) => patchSpec(c.s, { storage: { size: '2Gi' } }),
    voters: [1, 2, 3],
    uids: () => each(3, once),
    claimsDeleted: () => [],
    events: () => ({ GrowVolumesStarted: once, ExpandClaim: [3, 3], RecreateStatefulSet: once, GrowVolumesSucceeded: once }),
    members: () => [],
  },
  Backup: {
    workflow: 'takeBackup',
    type: 'Backup',
    replicas: 3,
    history: 'takeBackup-waited',
    trigger: (c) => annotate(c.s, { [ANNOTATIONS.backup]: 'chaos' }),
    workflowId: async (c) => requestedBackupWorkflowId(c.s.ns, 'queen', (await getCluster(c.s)).metadata.uid!, 'chaos'),
    awaitEnd: async (c, began, timeoutMs) => {
      const b = await requestedBackup(c.s, new Set(), (x) => x.status?.phase === 'Ready' || x.status?.phase === 'Failed', timeoutMs).catch(() => null);
      if (!b) return { outcome: `no end within ${Math.round(timeoutMs / 60_000)} min`, finishedAt: null };
      const finishedAt = Date.parse(b.status?.finishedAt ?? '') || Date.now();
      return { outcome: b.status?.phase === 'Ready' ? 'finished' : `${b.status?.phase}: ${b.status?.message}`, finishedAt: Math.max(finishedAt, began) };
    },
    voters: [1, 2, 3],
    uids: () => each(3, once),
    claimsDeleted: () => [],
    events: () => ({ BackupStarted: once, BackupReady: once }),
    members: () => [],
    check: async (c, result) => {
      const all = await backups(c.s);
      if (all.length !== 1) result.violations.push(`${all.length} QueenBackups, not 1: ${all.map((b) => b.metadata.name).join(', ')}`);
      const b = all[0];
      if (!b) return;
      const vs = await volumeSnapshot(c.s, b.metadata.name);
      if (vs?.status?.readyToUse !== true) result.violations.push(`its VolumeSnapshot is not ready: ${JSON.stringify(vs?.status ?? null)}`);
      if ((await getCluster(c.s)).metadata.annotations?.[ANNOTATIONS.backup]) result.violations.push('the backup annotation is still there');
      const steps = (await c.s.core.listNamespacedEvent({ namespace: c.s.ns, fieldSelector: `involvedObject.kind=QueenBackup,involvedObject.name=${b.metadata.name}` })).items;
      for (const reason of ['BackupStarted', 'SnapshotRequested', 'BackupReady']) {
        const n = steps.filter((e) => e.reason === reason).reduce((k, e) => k + (e.count ?? 1), 0);
        if (n !== 1) result.violations.push(`${n} ${reason} Events on the QueenBackup, not 1`);
      }
      result.notes.push(`backup ${b.metadata.name}: node ${b.status?.nodeId}, index ${b.status?.raftIndex}`);
    },
  },
  Restore: {
    workflow: 'restoreCluster',
    type: 'FormCluster',
    replicas: 3,
    history: 'restoreCluster',
    // The source: a cluster named source, and a backup of it; the cluster restored is queen, of one
    // voter (its scale-up is ScaleUp's cells).
    setup: async (c) => {
      await formed(c.s, seedSpec(), 'source');
      await annotate(c.s, { [ANNOTATIONS.backup]: 'source' }, 'source');
      const b = await requestedBackup(c.s, new Set(), (x) => x.status?.phase === 'Ready', 180_000, 'source');
      c.backup = b.metadata.name;
      c.sourcePods = (await pods(c.s, 'source')).map((p) => `${p.metadata!.name}:${p.metadata!.uid}`);
    },
    trigger: async (c) => void (await createCluster(c.s, seedSpec({ replicas: 1, bootstrap: { fromBackup: { name: c.backup! } } }))),
    voters: [1],
    // Restarted once, without QUEEN_RAFT_FORCE_RECOVER.
    uids: () => ({ 'queen-0': [2, 2] }),
    claimsDeleted: () => [],
    events: () => ({ FormClusterStarted: once, RestoreClaim: once, ApplyObjects: once, LeaderElected: once, RecoveredAlone: once, VotersLive: once, WriteCommitted: once, FormClusterSucceeded: once }),
    // The forced recovery's configuration: node 1 alone.
    members: () => ['remove 2', 'remove 3'],
    check: async (c, result) => {
      const qc = await getCluster(c.s);
      if (!qc.status?.restore?.recoveredAt) result.violations.push('status.restore.recoveredAt is not set');
      const pod0 = (await pods(c.s)).find((p) => p.metadata?.name === 'queen-0');
      if (pod0?.spec?.containers[0]?.env?.some((e) => e.name === 'QUEEN_RAFT_FORCE_RECOVER')) result.violations.push('pod 0 still runs with QUEEN_RAFT_FORCE_RECOVER');
      const source = (await pods(c.s, 'source')).map((p) => `${p.metadata!.name}:${p.metadata!.uid}`);
      if (JSON.stringify(source) !== JSON.stringify(c.sourcePods)) result.violations.push(`the source's pods changed: ${c.sourcePods?.join(' ')} → ${source.join(' ')}`);
    },
  },
  ...LINK_CELLS,
  GrowVolumesRestart: {
    workflow: 'growVolumes',
    type: 'GrowVolumes',
    replicas: 3,
    history: 'growVolumes',
    // Every volume's file system waits for its pod to start again (the storage stand-in's share).
    prepare: async (c) => void (await control.setResizePendingShare(1, c.s.ns)),
    trigger: (c) => patchSpec(c.s, { storage: { size: '2Gi' } }),
    voters: [1, 2, 3],
    uids: () => each(3, [2, 2]),
    claimsDeleted: () => [],
    events: () => ({ GrowVolumesStarted: once, ExpandClaim: [3, 3], RestartPod: [3, 3], RecreateStatefulSet: once, GrowVolumesSucceeded: once }),
    members: () => [],
  },
};

/** The Event reasons that are steps of an operation (the observer's phase Events are not). */
const STEP_REASON = new RegExp(
  '^(RestoreClaim|RecoveredAlone|BackupStarted|BackupReady|BackupFailed|BackupsDeleted|ApplyObjects|LeaderElected|VotersLive|WriteCommitted|RestartPod|ExpandClaim|' +
    `RecreateStatefulSet|AddLearner|Promote|RemoveMember|ReplaceStarted|ReplaceFinished|WipeVolume|DeleteClaim|ScalePods|UpdateTemplate|Canary|CanaryPassed|RollBack|FinishVoterChange|${LINK_STEP_REASONS.join('|')}|` +
    '(FormCluster|ReplaceNode|ScaleVoters|GrowVolumes|RollingUpgrade|PromoteStandby|Switchover)(Started|Succeeded|Failed|Yielded|Cancelled|RolledBack|Terminated))$',
);

/** The activity ids of an operation's recorded history, with their types ("4 restartPod"). */
export function recordedSteps(op: OperationName): { id: number; type: string }[] {
  const file = fileURLToPath(new URL(`../workflows/histories/${DEFS[op].history}.binpb`, import.meta.url));
  const history = proto.api.history.v1.History.decode(readFileSync(file));
  return history.events
    .map((e) => e.activityTaskScheduledEventAttributes)
    .filter((a) => !!a)
    .map((a) => ({ id: Number(a!.activityId), type: a!.activityType?.name ?? '' }));
}

const sim = async (ip: string, path: string, body: unknown) => {
  const res = await fetch(`http://${ip}:6632${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return res.json();
};

/** The pod IP of a pod of the cluster. */
async function podIp(s: Scenario, pod: string): Promise<string> {
  const p = (await pods(s)).find((x) => x.metadata?.name === pod);
  if (!p?.status?.podIP) throw new Error(`${pod} has no address`);
  return p.status.podIP;
}

/** Waits until the operation under test is in its middle (a pod restarted, or new pods asked for). */
async function middle(c: Ctx, op: OperationName): Promise<void> {
  await waitFor(
    'the operation in its middle',
    async () => {
      if (op === 'ScaleUp') return c.tracker.podUids.has('queen-3');
      return [...c.tracker.podUids.values()].some((u) => u.length >= 2) || c.tracker.deletedClaims.length > 0;
    },
    300_000,
  );
}

/**
 * The words the operator uses for a pod on a node that stopped reporting (plan/gates.ts
 * nodeDownProblem): "pod N is on node X, which has not reported since T ..." (or "which is
 * NotReady since T"), with the out-of-service taint a person may set.
 */
export const namesNode = (message: string | undefined, node: string) =>
  !!message && new RegExp(`pod \\d+ is on node ${node.replace(/\./g, '\\.')}, which (has not reported|is NotReady)`).test(message);

/**
 * Waits until the status names the stopped node (its words), or the operation ended, or the time is
 * up; says which, and the last status message seen.
 */
export async function nodeNamed(tracker: Tracker, node: string, timeoutMs: number): Promise<{ named: string; ended: boolean; last: string }> {
  const out = { named: '', ended: false, last: '' };
  const stopped = Date.now();
  await waitFor(
    `a status that names the stopped node ${node}`,
    async () => {
      const st = tracker.cluster()?.status;
      // (Ended since the node stopped: an operation not begun yet is no end.)
      if (!st?.operation && Date.parse(st?.lastOperation?.finishedAt ?? '') >= stopped - 1000) return (out.ended = true);
      out.last = st.message ?? '';
      if (namesNode(st.message, node)) return !!(out.named = st.message!);
      return false;
    },
    timeoutMs,
  ).catch(() => undefined);
  return out;
}

export interface FaultRun {
  /** What the fault did, for the table's notes. */
  notes: string[];
  /** What the fault saw that breaks a promise (a stopped node no status named). */
  violations: string[];
  /** Pods the fault took down on purpose. */
  done: Promise<void>;
}

/**
 * Injects a fault of the world into the running operation. Runs beside the wait for its end; the
 * notes say what was done and when.
 */
function injectWorldFault(c: Ctx, op: OperationName, fault: WorldFault, began: number): FaultRun {
  const notes: string[] = [];
  const violations: string[] = [];
  const at = () => `+${Math.round((Date.now() - began) / 1000)}s`;
  const done = (async () => {
    switch (fault) {
      case 'temporal-restart':
      case 'apiserver-restart': {
        const name = fault === 'temporal-restart' ? 'temporal' : 'kube-apiserver';
        await middle(c, op);
        await control.killProcess(name);
        notes.push(`${at()} ${name} killed`);
        await sleep(15_000);
        await control.startProcess(name);
        notes.push(`${at()} ${name} started again`);
        return;
      }
      case 'voter-kill': {
        // While the operation waits at a gate: a voter that is not the next to move is killed by
        // something else (its container, SIGKILL), held down 10 s, then the kubelet restarts it.
        await middle(c, op);
        await waitFor('the operation waiting at a gate', async () => !!c.tracker.cluster()?.status?.operation?.gate, 120_000).catch(() => undefined);
        const qc = c.tracker.cluster();
        const voters: number[] = qc?.status?.voters ?? [];
        const leader = qc?.status?.leader ?? null;
        // A follower that has not moved yet (its pod has one UID), else any follower.
        const followers = voters.filter((v) => v !== leader).map((v) => `queen-${v - 1}`);
        const victim = followers.find((p) => (c.tracker.podUids.get(p)?.length ?? 0) === 1) ?? followers[0]!;
        c.tracker.exempt(victim, Date.now() + 60_000);
        await control.kill(c.s.ns, victim, { signal: 'SIGKILL', hold: true });
        notes.push(`${at()} ${victim} killed while the operation waits at gate ${qc?.status?.operation?.gate ?? '(none)'}`);
        await sleep(10_000);
        await control.release(c.s.ns, victim);
        notes.push(`${at()} ${victim} started again`);
        return;
      }
      case 'leader-mid-promote': {
        // Set before the trigger (see runCell): the leader exits right after the joint entry commits.
        return;
      }
      case 'node-stop': {
        await middle(c, op);
        const qc = c.tracker.cluster();
        const voters: number[] = qc?.status?.voters ?? [];
        const leader = qc?.status?.leader ?? null;
        const followers = voters.filter((v) => v !== leader).map((v) => `queen-${v - 1}`);
        // Not the node of the cell's one operator replica: stopped with it, the operator is frozen
        // too and says nothing until Kubernetes evicts it (5 min) and another starts; that is the
        // soak's business, whose operator has two replicas as deploy/namespaced.yaml has.
        const nodeOfPod = new Map((await pods(c.s)).map((p) => [p.metadata?.name ?? '', p.spec?.nodeName ?? '']));
        const operatorNodes = new Set((await c.s.installed!.pods(c.s.core)).map((p) => p.spec?.nodeName ?? ''));
        const free = followers.filter((p) => !operatorNodes.has(nodeOfPod.get(p) ?? ''));
        const victim =
          free.find((p) => (c.tracker.podUids.get(p)?.length ?? 0) === 1) ?? free[0] ?? followers.find((p) => (c.tracker.podUids.get(p)?.length ?? 0) === 1) ?? followers[0]!;
        if (!free.includes(victim)) notes.push(`${at()} every follower shares its node with the operator`);
        const node = await stopNodeOf(c.s, c.tracker, victim, 3_600_000);
        if (!node) throw new Error(`${victim} runs on no node`);
        notes.push(`${at()} node ${node} (of ${victim}) stopped`);
        // A person is told what to do, or the operation ends; then the node comes back.
        const told = await nodeNamed(c.tracker, node, 240_000);
        if (told.named) notes.push(`${at()} status: ${told.named}`);
        else if (told.ended) notes.push(`${at()} the operation ended while the node was stopped`);
        else violations.push(`no status named the stopped node ${node} within 240 s (the status said: ${told.last || 'nothing'})`);
        await control.call('POST', `/nodes/${node}/start`, {});
        notes.push(`${at()} node ${node} started again`);
        return;
      }
    }
  })();
  return { notes, violations, done };
}

export interface CellOptions {
  /** How long the operation may take before the cell says it did not end (default 15 min). */
  timeoutMs?: number;
  /** Messages a second of the load client (default 20). */
  rate?: number;
  log?: (line: string) => void;
}

/**
 * Moves leadership to node `id` the one way the broker lets it move: a SIGTERM to the leader's
 * container, which hands leadership to the voter with the most log that acked within 1 s and did
 * not shut down itself in the last 60 s (the kubelet then starts the container again). Repeated
 * until node `id` leads; each leader asked is out of the draw for the next one. If every node of
 * `stays` was asked, node `id` would have no one to hand leadership to when the operation stops
 * it: it leads once 60 s have passed since the first of them was.
 */
async function leadershipTo(s: Scenario, id: number, stays: number[]): Promise<number> {
  const stopped = new Map<number, number>();
  const settled = (q: QueenCluster) => q.status?.phase === 'Ready' && !!q.status.leader && (q.status.members ?? []).every((m) => m.voter && m.live && m.ready);
  // The leader's pod as the API server has it: its container's restarts, and whether it is Ready.
  const podOf = async (name: string) => {
    const pod = (await pods(s)).find((p) => p.metadata?.name === name);
    return { restarts: pod?.status?.containerStatuses?.[0]?.restartCount ?? 0, ready: !!pod?.status?.conditions?.some((x) => x.type === 'Ready' && x.status === 'True') };
  };
  for (let attempt = 1; attempt <= 8; attempt++) {
    const leader = (await waitForCluster(s, 'every voter Ready and live under a leader', settled, 120_000)).status!.leader!;
    if (leader === id) {
      if (stays.every((n) => stopped.has(n))) await sleep(Math.min(...stays.map((n) => stopped.get(n)!)) + 61_000 - Date.now());
      return id;
    }
    stopped.set(leader, Date.now());
    const name = `queen-${leader - 1}`;
    const before = (await podOf(name)).restarts;
    await control.kill(s.ns, name, { signal: 'SIGTERM' });
    await waitForCluster(s, `a node other than ${leader} leading`, (q) => !!q.status?.leader && q.status.leader !== leader, 60_000);
    await waitFor(`${name} started again and Ready`, async () => {
      const now = await podOf(name);
      return now.restarts > before && now.ready ? true : undefined;
    }, 120_000);
  }
  throw new Error(`node ${id} did not come to lead after 8 hand-offs`);
}

/** Runs one cell in a namespace of its own and says what a user would have seen. */
export async function runCell(op: OperationName, fault: Fault, opts: CellOptions = {}): Promise<CellResult> {
  const def = DEFS[op];
  const log = opts.log ?? ((line: string) => console.log(line));
  const s = await scenario(`chaos-${op.toLowerCase().slice(0, 12)}`);
  const result: CellResult = {
    operation: op,
    fault: faultName(fault),
    outcome: '',
    seconds: null,
    pushes: null,
    pushesFailed: null,
    lost: null,
    violations: [],
    notes: [],
    activities: [],
    namespace: s.ns,
  };
  let tracker: Tracker | null = null;
  let load: Load | null = null;
  let membership: MembershipLog | null = null;
  try {
    const crashAt = fault.kind === 'crash' ? `${def.workflow}:${fault.activityId}` : null;
    await grantNodeReads(s.ns);
    await s.install({}, { replicas: 1, env: crashAt ? { QUEEN_CRASH_AT: crashAt } : {} });
    tracker = await track(s.kc, s.ns);
    const c: Ctx = { s, tracker, leader: null, target: null, claimsBefore: new Map() };
    if (def.setup) await def.setup(c);
    else if (op !== 'FormCluster') {
      const set = def.cluster ? await def.cluster(s) : { qc: await formed(s, seedSpec({ replicas: def.replicas, ...def.spec })), service: 'queen' };
      const qc = set.qc;
      c.leader = qc.status?.leader ?? null;
      load = startLoad({ kubeConfig: s.kc, namespace: s.ns, service: set.service, rate: opts.rate ?? 20 });
      // The load reaches every pod before the operation begins.
      await sleep(3000);
    }
    for (const [name, uids] of tracker.claimUids) c.claimsBefore.set(name, uids.at(-1)!);
    await def.prepare?.(c, load);
    if (fault.kind === 'leader-mid-promote') {
      const ip = await podIp(s, `queen-${c.leader! - 1}`);
      await sim(ip, '/_sim/fault', { crashAfterJoint: true });
      tracker.exempt(`queen-${c.leader! - 1}`, Date.now() + 3_600_000);
      result.notes.push(`the leader, node ${c.leader}, exits right after the joint configuration of the next voter change commits`);
    }
    // The brokers' logs so far: the configuration entries after this index are the operation's.
    membership = await followMembership(s.ns);
    const logBefore = membership.lastIndex();
    tracker.reset();
    const began = Date.now();
    log(`[${s.ns}] ${op} × ${result.fault}: begins`);
    tracker.expectOperation(true);
    await def.trigger(c);
    const helping = def.during?.(c, began).catch((e: unknown) => void result.violations.push(`the person's part could not be played: ${(e as Error).message}`));
    const injected = fault.kind === 'none' || fault.kind === 'crash' ? null : injectWorldFault(c, op, fault.kind, began);
    const end = await (def.awaitEnd ?? ((_, b, t) => awaitEnd(s, def, b, t)))(c, began, opts.timeoutMs ?? 15 * 60_000);
    await helping;
    tracker.expectOperation(false);
    if (injected) {
      await injected.done.catch((e) => result.violations.push(`the fault could not be injected: ${(e as Error).message}`));
      result.notes.push(...injected.notes);
      result.violations.push(...injected.violations);
    }
    result.violations.push(...tracker.silences);
    result.seconds = end.finishedAt ? Math.round((end.finishedAt - began) / 1000) : null;
    result.outcome = end.outcome;
    if (end.outcome !== 'finished') result.violations.push(`the operation did not finish: ${end.outcome}`);
    const report: LoadReport | null = load ? await load.stop() : null;
    load = null;

    // The operation's run(s), as Temporal recorded them.
    const wid = def.workflowId ? await def.workflowId(c) : `queencluster/${s.ns}/queen`;
    // (The end writes the status just before the run closes.)
    const all = end.outcome === 'finished' ? await settledRuns(s, wid).catch(() => workflowRuns(s, wid)) : await workflowRuns(s, wid).catch(() => []);
    const runs = all.filter((r) => r.type === def.workflow);
    if (runs.length !== 1) result.violations.push(`${runs.length} runs of ${def.workflow}: ${runs.map((r) => r.status).join(', ')}`);
    else if (runs[0]!.status !== 'COMPLETED' && end.outcome === 'finished') result.violations.push(`its run is ${runs[0]!.status}`);
    for (const run of runs) {
      const events = await historyEvents(s, run);
      result.activities.push(
        ...events.map((e) => e.activityTaskScheduledEventAttributes).filter((a) => !!a).map((a) => `${a!.activityId}:${a!.activityType?.name}`),
      );
    }
    if (fault.kind === 'crash') {
      const m = new RegExp(`crash point ${def.workflow}:${fault.activityId} \\((\\w+)\\) reached`).exec(s.operatorLog());
      if (m) result.step = `${fault.activityId} ${m[1]}`;
      else {
        result.outcome = 'crash point not reached';
        result.violations.push(`the operator never reached its crash point ${def.workflow}:${fault.activityId} (the run's activities: ${result.activities.join(' ')})`);
      }
    }
    if (end.outcome === 'finished') await checkAfter(c, def, result);
    if (end.outcome === 'finished') await def.check?.(c, result);
    // Membership: each change the operation makes once in the brokers' logs, and no other (all
    // of them only when it finished).
    await membership.poll();
    const changes = membership.changes(logBefore);
    result.notes.push(`membership changes: ${changes.map((ch) => `${changeKey(ch)} @${ch.index}`).join(', ') || 'none'}`);
    result.violations.push(...membershipViolations(changes, end.outcome === 'finished' ? def.members(c) : null));
    const joint = membership.jointAtEnd();
    if (joint && end.outcome === 'finished') result.violations.push(`a joint configuration is left in the Raft log: ${joint}`);
    if (membership.problems.length) result.notes.push(`the Raft logs: ${[...new Set(membership.problems)].slice(0, 3).join('; ')}`);
    if (report) {
      result.pushes = report.sent;
      result.pushesFailed = report.failedAttempts.length;
      const ips = await reachableVoters(s, result.notes);
      const lost = await verifyAcknowledged(report, ips);
      result.lost = lost.length;
      if (lost.length) result.violations.push(`${lost.length} acknowledged messages lost (${lost.slice(0, 3).join(', ')}...)`);
      if (report.unacknowledged.length) result.notes.push(`${report.unacknowledged.length} pushes never acknowledged`);
    }
    const violated = (tracker.disruptions ?? []).filter((d) => d.othersDown.some((o) => o.downForMs > 2000));
    for (const d of violated) {
      result.violations.push(`the operator stopped ${d.pod} while ${d.othersDown.map((o) => `${o.pod} (down ${Math.round(o.downForMs / 1000)} s)`).join(', ')} was down`);
    }
    // Never two voters down by the operator's hand: the pods a fault took down are exempt. (While
    // a cluster forms, its voters are not Ready yet: nothing was stopped.)
    if (op !== 'FormCluster') {
      for (const o of tracker.overDown) result.violations.push(`two voters down at one time: ${o}`);
    }
    if (tracker.marked.length) result.notes.push(`marked not Ready from outside their kubelets (not counted as down): ${tracker.marked.join('; ')}`);
  } catch (e) {
    result.outcome ||= 'error';
    result.violations.push(`the cell failed: ${(e as Error).message}`);
  } finally {
    if (load) await load.stop().catch(() => undefined);
    if (result.violations.length && tracker) {
      result.notes.push(`status timeline: ${tracker.timeline.join(' | ')}`);
    }
    tracker?.stop();
    membership?.stop();
    if (fault.kind === 'node-stop') await restartStoppedNodes().catch(() => undefined);
    await s.close().catch(() => undefined);
    await revokeNodeReads(s.ns).catch(() => undefined);
  }
  log(`[${s.ns}] ${op} × ${result.fault}${result.step ? ` (${result.step})` : ''}: ${result.outcome} in ${result.seconds ?? '?'} s; ${result.violations.length ? `VIOLATIONS: ${result.violations.join('; ')}` : 'ok'}`);
  return result;
}

/**
 * What the cluster-wide install grants the operator beyond a namespace, for a namespaced install
 * (deploy/namespaced.yaml binds deploy/rbac.yaml's ClusterRole with a RoleBinding, which grants
 * nothing on cluster-scoped objects): `get` on Nodes, so it can say which node of a pod stopped
 * reporting. One ClusterRole with that rule alone, one ClusterRoleBinding per namespace.
 */
export async function grantNodeReads(namespace: string): Promise<void> {
  const yaml = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: queen-chaos-read-nodes
rules:
  - apiGroups: [""]
    resources: ["nodes"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: queen-chaos-read-nodes-${namespace}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: queen-chaos-read-nodes
subjects:
  - kind: ServiceAccount
    name: queen-operator
    namespace: ${namespace}
`;
  const r = await applyManifest(yaml, namespace);
  if (r.code !== 0) throw new Error(`the node reads could not be granted: ${r.stderr}`);
}

export async function revokeNodeReads(namespace: string): Promise<void> {
  await kubectl(['delete', 'clusterrolebinding', `queen-chaos-read-nodes-${namespace}`, '--ignore-not-found']);
}

/**
 * The addresses of the voters that have a pod with an address: the ones whose committed messages
 * can be read. A voter without one (its pod never scheduled) is noted, not counted as having lost
 * everything.
 */
export async function reachableVoters(s: Scenario, notes: string[]): Promise<string[]> {
  const ips = await voterIps(s);
  const missing = ips.filter((ip) => !ip).length;
  if (missing) notes.push(`${missing} voter${missing === 1 ? ' has' : 's have'} no pod address: the acknowledged messages were checked on the other ${ips.length - missing}`);
  return ips.filter((ip) => !!ip);
}

async function restartStoppedNodes(): Promise<void> {
  const info = await control.call<{ nodes: string[] }>('GET', '/');
  for (const n of info.nodes) await control.call('POST', `/nodes/${n}/start`, {});
}

/**
 * Waits until the operation has ended (status.lastOperation of its type, begun after the trigger,
 * no operation running) and the cluster is Ready again; or until it is Blocked for a minute (a
 * person is asked for); or the time is up.
 */
async function awaitEnd(s: Scenario, def: OperationDef, began: number, timeoutMs: number): Promise<{ outcome: string; finishedAt: number | null }> {
  const deadline = Date.now() + timeoutMs;
  let blockedSince: number | null = null;
  let last: QueenCluster | null = null;
  for (;;) {
    try {
      last = await getCluster(s);
      const st = last.status;
      const lo = st?.lastOperation;
      if (lo && lo.type === def.type && Date.parse(lo.startedAt ?? '') >= began - 2000 && !st?.operation) {
        const finishedAt = Date.parse(lo.finishedAt ?? '') || Date.now();
        if (lo.result !== 'Succeeded') return { outcome: `${lo.result}: ${lo.message}`, finishedAt };
        // The end writes the phase from a fresh look; a cluster still catching up turns Ready soon.
        const ready = await waitFor('Ready after the operation', async () => (await getCluster(s)).status?.phase === 'Ready', 180_000).catch(() => false);
        if (!ready) return { outcome: `finished, but not Ready: ${row(await getCluster(s))}`, finishedAt };
        return { outcome: 'finished', finishedAt };
      }
      if (st?.phase === 'Blocked') {
        blockedSince ??= Date.now();
        if (Date.now() - blockedSince > 60_000) return { outcome: `blocked: ${st.message}`, finishedAt: null };
      } else blockedSince = null;
    } catch {
      // the API server may be away (a fault): look again
    }
    if (Date.now() > deadline) return { outcome: `no end within ${Math.round(timeoutMs / 60_000)} min: ${last ? row(last) : 'no status'}`, finishedAt: null };
    await sleep(1000);
  }
}

/** What a user sees once the operation ended: voters, pods, claims, Events. */
async function checkAfter(c: Ctx, def: OperationDef, result: CellResult): Promise<void> {
  const { s, tracker } = c;
  const qc = await getCluster(s);
  if (JSON.stringify(qc.status?.voters) !== JSON.stringify(def.voters)) result.violations.push(`voters ${JSON.stringify(qc.status?.voters)}, not ${JSON.stringify(def.voters)}`);
  if (def.type === 'ReplaceNode' && qc.metadata.annotations?.[ANNOTATIONS.replacePod]) result.violations.push('the replace-pod annotation is still there');
  // Pods: restarted as often as the operation means to, no more.
  for (const [pod, [min, max]] of Object.entries(def.uids(c))) {
    const n = tracker.podUids.get(pod)?.length ?? 0;
    if (n < min || n > max) result.violations.push(`${pod} had ${n} UIDs (${n - 1} restarts), not ${min === max ? min : `${min}-${max}`}`);
  }
  // Claims: only those the operation deletes, each once, with the UID it had before.
  const allowed = new Set(def.claimsDeleted(c).map((n) => c.claimsBefore.get(n)).filter((u): u is string => !!u));
  for (const d of tracker.deletedClaims) {
    if (!allowed.has(d.uid)) result.violations.push(`claim ${d.name} (uid ${d.uid.slice(0, 8)}) was deleted, and the operation did not record it`);
  }
  // A replaced pod is stopped for its old volume only: once that claim is gone, the pod the
  // StatefulSet makes has the new volume, and nothing stops it again.
  if (def.type === 'ReplaceNode' && c.target) {
    const oldClaim = c.claimsBefore.get(`data-${c.target}`);
    const goneAt = oldClaim ? tracker.claimGoneAt.get(oldClaim) : undefined;
    if (goneAt === undefined) result.violations.push(`the old claim of ${c.target} was never seen gone`);
    for (const d of tracker.podDeletions) {
      if (goneAt !== undefined && d.pod === c.target && d.at > goneAt) {
        result.violations.push(`${c.target} (uid ${d.uid.slice(0, 8)}) was deleted ${((d.at - goneAt) / 1000).toFixed(1)} s after its old claim was gone`);
      }
    }
  }
  // Steps: each once in `kubectl describe`, as many as the operation has (the formation before
  // it, in the same namespace, has its own).
  const events = (await clusterEvents(s)).filter((e) => STEP_REASON.test(e.reason ?? ''));
  const counted = new Map<string, number>();
  const seen = new Map<string, number>();
  for (const e of events) {
    counted.set(e.reason!, (counted.get(e.reason!) ?? 0) + (e.count ?? 1));
    const key = `${e.reason}: ${e.message}`;
    seen.set(key, (seen.get(key) ?? 0) + (e.count ?? 1));
  }
  for (const [key, n] of seen) if (n > 1) result.violations.push(`"${key}" is ${n} times in kubectl describe`);
  const expected = def.events(c);
  const formation = def.type === 'FormCluster' ? {} : DEFS.FormCluster.events(c);
  for (const [reason, [min, max]] of Object.entries(expected)) {
    const n = counted.get(reason) ?? 0;
    if (n < min || n > max) result.violations.push(`${n} ${reason} Events, not ${min === max ? min : `${min}-${max}`}`);
  }
  for (const [reason, n] of counted) {
    if (expected[reason] || formation[reason]) continue;
    const msgs = [...seen.keys()].filter((k) => k.startsWith(`${reason}:`));
    // A voter change left half done by a leader that died is finished and said (the fault asks for it).
    (reason === 'FinishVoterChange' ? result.notes : result.violations).push(`${n} ${reason} Events: ${msgs.join(' | ')}`);
  }
  if (def.type === 'ScaleVoters' && def.replicas === 5) {
    // A hand-off restart shows as a RestartPod Event for each deletion of pod 3 or 4 while its node
    // was still a voter. Not as a new UID: the node may leave, and the StatefulSet scale down, before
    // the successor of the stopped pod is made (crash@5 at 01a348e: the Event, one UID).
    const handOffs = tracker.disruptions.filter((d) => d.pod === 'queen-3' || d.pod === 'queen-4').length;
    if (handOffs !== (counted.get('RestartPod') ?? 0)) result.violations.push(`${handOffs} hand-off restarts of pods 3 and 4, ${counted.get('RestartPod') ?? 0} RestartPod Events`);
  }
}

/**
 * Stops the test bed node `pod` runs on (its kubelet silent, its pods cut off the network), every
 * Queen pod on it exempt from the invariants for `exemptMs`: their voters are down by the world's
 * hand, not the operator's. When one of them leads, the other voters lose their quorum with it:
 * each says it is not ready once its leader has been silent for the broker's readiness quorum,
 * until a new leader is elected (a few seconds); they are exempt for FAILOVER_EXEMPT_MS. Returns
 * the node's name, or null when the pod runs on none.
 */
export async function stopNodeOf(s: Scenario, tracker: Tracker, pod: string, exemptMs: number): Promise<string | null> {
  const all = await pods(s);
  const node = all.find((p) => p.metadata?.name === pod)?.spec?.nodeName;
  if (!node) return null;
  const there = all.filter((p) => p.spec?.nodeName === node);
  const names = new Set(there.map((p) => p.metadata?.name ?? ''));
  // Whether one of them leads, as its broker says right before the stop (status may lag).
  const roles = await Promise.all(there.map((p) => (p.status?.podIP ? readHealth(`http://${p.status.podIP}:${BROKER_HTTP_PORT}`, 1000) : Promise.resolve(null))));
  const now = Date.now();
  for (const p of names) tracker.exempt(p, now + exemptMs);
  if (roles.some((h) => h?.role === 'leader')) {
    for (const p of all.map((x) => x.metadata?.name ?? '')) if (!names.has(p)) tracker.exempt(p, now + FAILOVER_EXEMPT_MS);
  }
  await control.call('POST', `/nodes/${node}/stop`, {});
  return node;
}

/** How long the voters that stay are exempt when a fault takes their leader (or their majority) with it. */
export const FAILOVER_EXEMPT_MS = 20_000;
