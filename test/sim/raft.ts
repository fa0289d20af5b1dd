// One simulated Queen 2.x raft node: elections with pre-vote, replication, commit by majority
// (both majorities while joint), apply, purge and snapshots, the leader-side membership planner,
// the command path used by KV puts and queue pushes/pops, and the figures /health and the
// membership view report (queen-broker-api.md §1-§3).

import * as fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { randomUUID, createHash } from 'node:crypto';
import { BASELINE_KINDS, isHostPort, liveWithinMs, transferMs, type Logger, type SimConfig } from './config.ts';
import { Net, RawJson, Unreachable } from './net.ts';
import { NodeScope } from './scope.ts';
import { DiskFullError, Store, type SnapshotPayload } from './store.ts';
import type { LinkNode } from './link.ts';
import { applyEntry, entryDigest, PoisonError, skipEntry, type SmState } from './statemachine.ts';
import {
  allMembers,
  allVoters,
  sameSet,
  sorted,
  voterSets,
  type ApplyFailure,
  type Command,
  type Entry,
  type MembershipConfig,
} from './types.ts';

const mono = (): number => performance.now();

interface Progress {
  next: number;
  matched: number | null;
  inflight: boolean;
  lastAckAt: number | null;
  ackBase: number | null; // "counts from the election" for members never heard from
  lastSendAt: number;
  sentCommit: number;
  snapshotting: boolean;
  lastProgressAt: number;
  backoffUntil: number;
  kinds: number | null;
  /** Bandwidth model: when the link to this member is free for the next batch of entries. */
  freeAt: number;
  /** When the last append this member acknowledged was sent (a read's quorum round counts these). */
  ackedSentAt: number;
}

export interface MembersView {
  leaderId: number;
  term: number;
  quorumAckMs: number | null;
  commit: number;
  members: { nodeId: number; matched: number | null; lastAckMs: number | null }[];
}

export interface Answer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

export type ChangeOp =
  | { op: 'learner'; id: number; raft: string; http: string }
  | { op: 'promote'; ids: number[]; force: boolean }
  | { op: 'voters'; voters: number[]; force: boolean }
  | { op: 'remove'; id: number };

interface AppendReq {
  term: number;
  leaderId: number;
  leaderRaft: string | null;
  prevIndex: number;
  prevTerm: number;
  entries: Entry[];
  leaderCommit: number;
}

interface AppendReply {
  term: number;
  success: boolean;
  matchIndex?: number;
  hint?: number;
  lastLogIndex: number;
  kinds: number;
}

export function retry503(leader: number | null, text?: string): Answer {
  const body: Record<string, unknown> = {
    error: text ?? (leader !== null ? `not the leader; retry against ${leader}` : 'no quorum-ack lease; retry'),
    code: 'retry',
  };
  if (leader !== null) body.leader = String(leader);
  return { status: 503, body, headers: { 'retry-after': '1' } };
}

function refusal(status: number, code: string, error: string): Answer {
  return { status, body: { ok: false, code, error } };
}

export class RaftNode {
  cfg: SimConfig;
  logger: Logger;
  store: Store;
  net: Net;
  self: number;

  state: 'follower' | 'candidate' | 'leader' = 'follower';
  leaderId: number | null = null;
  leaderRaft: string | null = null;
  lastLeaderContact = 0;
  commitIndex = 0;
  stopped: { reason: string; detail: string } | null = null;
  applyFailure: ApplyFailure | null = null;
  electionsDisabled = false;
  running = false;
  crashAfterJoint = false;
  /** The node ends with this exit code (a crash, the exit 75 after staging a snapshot). */
  onFatalExit: (code: number) => void = () => this.t.kill();
  /** The node's scope: every timer, sleep and call of this node goes through it. */
  readonly t: NodeScope;

  private electionTimer: NodeJS.Timeout | null = null;
  private tickTimer: NodeJS.Timeout | null = null;
  private slowTimer: NodeJS.Timeout | null = null;
  private readTimer: NodeJS.Timeout | null = null;
  private diskTimer: NodeJS.Timeout | null = null;
  private versionTimer: NodeJS.Timeout | null = null;
  private electionRound = 0;

  // leader state
  progress = new Map<number, Progress>();
  leaderSince = 0;
  blankIndex = 0;
  handingOff = false;
  private lastProposedCmd = 0;
  private plannerPaused = false;
  private pauseWaiters: (() => void)[] = [];
  private changeLock = false;
  private lastQuorumHandoff = 0;
  private viewCache: { v: MembersView; at: number } | null = null;
  private commitWaiters: { index: number; term: number; resolve: (ok: boolean) => void }[] = [];
  private quorumWaiters: { since: number; resolve: (ok: boolean) => void }[] = [];
  private kickPending = false;

  // follower state
  view: { v: MembersView; at: number } | null = null;
  commitReading: { commit: number; at: number } | null = null;
  handedOff = new Map<number, number>();

  // membership configurations found in the log (newest last), over the applied one
  private memberships: { index: number; term: number; config: MembershipConfig }[] = [];

  // apply
  private applyScheduled = false;
  private stateDirty = false;
  private lastSaveAt = 0;
  private lastSaveCost = 0;
  private applyWaiters = new Map<number, { term: number; resolve: (r: { ok: boolean; result?: unknown; code?: string }) => void }[]>();
  private recentResults = new Map<number, { term: number; result: unknown }>();

  // disk gate
  gateClosed = false;

  /** The cluster link (link.ts): set by node.ts when the node has a link setting. */
  link: LinkNode | null = null;

  constructor(cfg: SimConfig, logger: Logger, store: Store, net: Net) {
    this.t = net.scope;
    this.cfg = cfg;
    this.logger = logger;
    this.store = store;
    this.net = net;
    this.self = cfg.nodeId;
    this.commitIndex = store.commit;
    const base = store.state.membership;
    if (base) this.memberships.push(base);
    for (const e of store.log) {
      if (e.kind === 'membership' && e.membership && (!base || e.index > base.index)) {
        this.memberships.push({ index: e.index, term: e.term, config: e.membership });
      }
    }
  }

  get term(): number {
    return this.store.meta.term;
  }

  get sm(): SmState {
    return this.store.state;
  }

  // ---- membership helpers ----------------------------------------------------------------

  membership(): { index: number; term: number; config: MembershipConfig } | null {
    return this.memberships.length > 0 ? this.memberships[this.memberships.length - 1]! : null;
  }

  initialized(): boolean {
    return this.membership() !== null;
  }

  isVoter(id = this.self): boolean {
    const m = this.membership();
    return m !== null && allVoters(m.config).includes(id);
  }

  isMember(id = this.self): boolean {
    const m = this.membership();
    return m !== null && allMembers(m.config).includes(id);
  }

  clusterId(): string | null {
    return this.membership()?.config.clusterId ?? null;
  }

  clusterVersion(): number {
    return this.sm.clusterVersion || this.membership()?.config.clusterVersion || 0;
  }

  ownRaftAddr(): string {
    const m = this.membership();
    const reg = m?.config.nodes[String(this.self)]?.raft;
    if (reg) return reg;
    const peer = this.cfg.peers.find((p) => p.id === this.self);
    return peer ? peer.raft : `${this.cfg.ip}:${this.cfg.raftPort}`;
  }

  addrOf(id: number): string | null {
    const m = this.membership();
    const reg = m?.config.nodes[String(id)]?.raft;
    if (reg) return reg;
    if (id === this.leaderId && this.leaderRaft) return this.leaderRaft;
    const peer = this.cfg.peers.find((p) => p.id === id);
    return peer ? peer.raft : null;
  }

  // Stopped for reporting: openraft gone, or apply refused an entry (the leader keeps shipping the
  // commit point for a moment so that every node reaches the same entry).
  isStopped(): boolean {
    return this.stopped !== null || this.applyFailure !== null;
  }

  role(): string {
    if (this.isStopped()) return 'stopped';
    if (this.state === 'leader') return this.sm.applied >= this.blankIndex ? 'leader' : 'candidate';
    if (!this.isMember() || !this.isVoter()) return 'learner';
    if (this.state === 'candidate') return 'candidate';
    return 'follower';
  }

  isLeaderReady(): boolean {
    return !this.isStopped() && this.state === 'leader' && this.commitIndex >= this.blankIndex;
  }

  // ---- lifecycle -------------------------------------------------------------------------

  start(): void {
    if (this.running) return;
    this.running = true;
    this.tickTimer = this.t.setInterval(() => this.tick(), this.cfg.heartbeatMs);
    this.slowTimer = this.t.setInterval(() => this.slowTick(), 250);
    this.readTimer = this.t.setInterval(() => this.probeLeaderCommit(), 1000);
    if (this.cfg.clusterVersionMs > 0) this.versionTimer = this.t.setInterval(() => this.raiseClusterVersion(), this.cfg.clusterVersionMs);
    if (this.cfg.volumeBytes !== null || this.cfg.volumeFile) this.diskTimer = this.t.setInterval(() => this.checkDisk(), this.cfg.diskCheckMs);
    // The volume file: re-read when the test bed rewrites it (at once), and every 2 s anyway
    // (every disk check where its folder cannot be watched).
    const volumeFile = this.cfg.volumeFile;
    if (volumeFile) {
      this.t.watchFile(volumeFile, () => {
        this.readVolumeFile();
        this.checkDisk();
      }, 2000, this.cfg.diskCheckMs);
      this.readVolumeFile();
    }
    this.checkDisk();
    this.resetElectionTimer();
    this.scheduleApply();
  }

  shutdownTimers(): void {
    for (const t of [this.tickTimer, this.slowTimer, this.readTimer, this.diskTimer, this.versionTimer]) if (t) this.t.clear(t);
    if (this.electionTimer) this.t.clear(this.electionTimer);
    this.tickTimer = this.slowTimer = this.readTimer = this.diskTimer = this.electionTimer = this.versionTimer = null;
  }

  // Writes that may hit a full disk: the node stops (ENOSPC in the raft log writer, §3.4).
  private persist(what: string, fn: () => void): boolean {
    if (this.stopped) return false;
    try {
      fn();
      return true;
    } catch (e) {
      if (e instanceof DiskFullError) {
        this.stop('disk_full', `${what}: ${e.message}`);
        return false;
      }
      throw e;
    }
  }

  stop(reason: string, detail: string): void {
    if (this.stopped) return;
    this.stopped = { reason, detail };
    this.logger.error('raft stopped', { reason, detail });
    if (this.electionTimer) this.t.clear(this.electionTimer);
    this.electionTimer = null;
    this.becomeFollowerState();
    for (const [, ws] of this.applyWaiters) for (const w of ws) w.resolve({ ok: false, code: 'stopped' });
    this.applyWaiters.clear();
  }

  private becomeFollowerState(): void {
    const wasLeader = this.state === 'leader';
    this.state = 'follower';
    if (wasLeader) {
      this.progress.clear();
      this.handingOff = false;
      this.resumePlanner();
      for (const w of this.commitWaiters) w.resolve(false);
      this.commitWaiters = [];
      for (const w of this.quorumWaiters.splice(0)) w.resolve(false);
    }
  }

  private setTerm(term: number, votedFor: number | null): void {
    this.store.meta.term = term;
    this.store.meta.votedFor = votedFor;
    this.persist('raft meta', () => this.store.saveMeta());
  }

  private stepDown(term: number, leader: number | null): void {
    if (term > this.term) this.setTerm(term, null);
    if (this.state === 'leader') this.logger.info('stepping down', { term });
    this.becomeFollowerState();
    this.leaderId = leader;
    this.resetElectionTimer();
  }

  // ---- timers ----------------------------------------------------------------------------

  /**
   * A node shutting down starts no election of its own, but one asked by a leader's transfer it
   * still runs: the broker's hand-off picks any voter that acked within 1 s, one that is itself
   * terminating included, and that one then leads until its own shutdown hands off again (F11 in
   * the broker's test/recovery/FINDINGS.md: "the SIGTERM hand-off cascaded onto pods that were
   * themselves terminating"; §3.5 step 6).
   */
  private canElect(transfer = false): boolean {
    return this.running && !this.stopped && (transfer || !this.electionsDisabled) && this.state !== 'leader' && this.isVoter();
  }

  /**
   * The leader lease: openraft's election_timeout_max, twice QUEEN_RAFT_ELECTION_MS (the broker's
   * raft_config, server/src/rsm/replicator/raft/mod.rs). A voter that heard its leader within it
   * grants no vote.
   */
  leaseMs(): number {
    return 2 * this.cfg.electionMs;
  }

  /**
   * A follower of a known leader waits out the lease before its randomized election timeout runs
   * (openraft adds the lease to the timeout while the vote it follows is committed; inferred, see
   * test/sim/README.md): a leader killed is replaced after lease + 1-2 s, about 3.5 s at the
   * broker's defaults, as its rehearsals measure. Once the lease has run out (an election that
   * did not succeed), only the randomized timeout.
   */
  resetElectionTimer(): void {
    if (this.electionTimer) this.t.clear(this.electionTimer);
    this.electionTimer = null;
    if (!this.canElect()) return;
    const e = this.cfg.electionMs;
    const lease = this.leaderId !== null && this.lastLeaderContact > 0 ? Math.max(0, this.lastLeaderContact + this.leaseMs() - mono()) : 0;
    this.electionTimer = this.t.setTimeout(() => this.preVote(), lease + e + Math.random() * e);
  }

  private tick(): void {
    if (this.stopped) return;
    if (this.state === 'leader') {
      this.viewCache = null;
      for (const id of this.replicationTargets()) this.replicate(id);
      const q = this.quorumAckMs();
      const limit = 3 * this.cfg.electionMs;
      if (q !== null && q > limit && mono() - this.lastQuorumHandoff > limit && allVoters(this.membership()!.config).length > 1) {
        this.lastQuorumHandoff = mono();
        const target = this.handoffTarget(false);
        if (target !== null) {
          this.logger.warn('no quorum acknowledgement; trying to hand leadership off', { target, quorumAckMs: q });
          void this.sendTransfer(target, false);
        }
      }
    }
  }

  private slowTick(): void {
    if (this.stopped) return;
    // Save the applied state when it changed: every 5 seconds, or sooner when enough entries were
    // applied for a purge to be worth it; never more often than ten times the cost of a save. The
    // state holds every queued message: saved each second under load, it was the largest cost of
    // a node, and a boot replays at most 5 seconds of log more.
    const now = mono();
    const behind = this.sm.applied - this.store.stateIndex;
    if (
      this.stateDirty &&
      now - this.lastSaveAt >= 10 * this.lastSaveCost &&
      (now - this.lastSaveAt >= 5000 || behind >= Math.max(16, this.cfg.logKeep / 2))
    ) {
      this.stateDirty = false;
      this.persist('state', () => this.store.saveState(this.sm));
      this.lastSaveAt = mono();
      this.lastSaveCost = this.lastSaveAt - now;
    }
    this.maybePurge();
  }

  /** The file system grew (or shrank) under the running node: the test bed says so in QUEEN_SIM_VOLUME_FILE. */
  private volumeMtime = -1;
  private readVolumeFile(): void {
    const file = this.cfg.volumeFile;
    if (!file) return;
    let mtime = 0;
    try {
      mtime = fs.statSync(file).mtimeMs;
    } catch {
      return;
    }
    if (mtime === this.volumeMtime) return;
    this.volumeMtime = mtime;
    try {
      const b = (JSON.parse(fs.readFileSync(file, 'utf8')) as { bytes?: unknown }).bytes;
      if (typeof b !== 'number' || !(b > 0) || b === this.cfg.volumeBytes) return;
      const before = this.cfg.volumeBytes;
      this.cfg.volumeBytes = b;
      this.store.volumeBytes = b;
      this.logger.info('the volume\'s file system changed size while running', { fromBytes: before, toBytes: b });
      if (before === null && this.running && !this.diskTimer) this.diskTimer = this.t.setInterval(() => this.checkDisk(), this.cfg.diskCheckMs);
    } catch {
      this.volumeMtime = -1; // half written: read it again
    }
  }

  /**
   * The disk gate, every QUEEN_RAFT_DISK_CHECK_MS: usage is what the store knows it wrote since it
   * last measured the folder (every write is counted as it is made), the folder itself measured
   * again at most every second (a directory walk per node ten times a second is most of what a
   * node at rest costs).
   */
  private lastMeasureAt = -Infinity;
  checkDisk(): void {
    const vol = this.cfg.volumeBytes;
    if (vol === null) return;
    const now = mono();
    if (now - this.lastMeasureAt >= Math.max(1000, this.cfg.diskCheckMs)) {
      this.lastMeasureAt = now;
      this.store.measure();
    }
    const used = this.store.usage(); // the files, and the entries' padding
    const pct = (used / vol) * 100;
    if (pct >= 100) {
      this.stop('disk_full', `the data dir uses ${used} of ${vol} bytes`);
    }
    if (!this.gateClosed && pct >= this.cfg.diskHighPct) {
      this.gateClosed = true;
      this.logger.warn('disk gate closed: storage-growing writes answer 507', { usedBytes: used, volumeBytes: vol, pct: Math.round(pct) });
    } else if (this.gateClosed && pct < this.cfg.diskLowPct) {
      this.gateClosed = false;
      this.logger.info('disk gate reopened', { usedBytes: used, volumeBytes: vol, pct: Math.round(pct) });
    }
  }

  // ---- the cluster version (the broker's D20, §12.8) -----------------------------------------

  /** The index of a raise this leader proposed that this node has not applied yet: one at a time. */
  private versionRaise: number | null = null;

  /**
   * The catalogue version every member reads, as this leader heard it: its own build's, and each
   * member's from its answers to this leader's appends; null while a member has not answered
   * this leader yet or is not live (a member it does not hear from holds any raise back).
   */
  kindsFloor(): number | null {
    const m = this.membership();
    if (!m) return null;
    const now = mono();
    let floor = this.cfg.kinds;
    for (const id of allMembers(m.config)) {
      if (id === this.self) continue;
      const kinds = this.progress.get(id)?.kinds ?? null;
      if (kinds === null || !this.memberLive(id, now)) return null;
      floor = Math.min(floor, kinds);
    }
    return floor;
  }

  /**
   * Every QUEEN_RAFT_CLUSTER_VERSION_MS on the leader: when every member reads a higher catalogue
   * version than the cluster is at, one log entry raises it to that floor (the broker's
   * RunState::raise_cluster_version proposes one ClusterVersionSet, and nothing else until it is
   * answered). It never goes down; from that entry on a build that reads less refuses to boot on
   * the data (node.ts) and cannot be added as a learner (kinds_behind).
   */
  private raiseClusterVersion(): void {
    if (!this.isLeaderReady() || this.handingOff || this.plannerPaused) return;
    if (this.versionRaise !== null && this.versionRaise > this.sm.applied) return;
    this.versionRaise = null;
    const floor = this.kindsFloor();
    const committed = this.clusterVersion();
    if (floor === null || floor <= committed) return;
    this.logger.info(`every member reads effect catalogue version ${floor}: raising the cluster version`, { from: committed, to: floor });
    const e = this.appendAsLeader({ kind: 'version', version: floor });
    if (e) this.versionRaise = e.index;
  }

  // ---- elections -------------------------------------------------------------------------

  private lastLog(): { index: number; term: number } {
    return { index: this.store.lastIndex(), term: this.store.lastTerm() };
  }

  private quorumOf(sets: number[][], grants: Set<number>): boolean {
    return sets.every((set) => set.filter((id) => grants.has(id)).length >= Math.floor(set.length / 2) + 1);
  }

  private preVote(): void {
    if (!this.canElect()) return;
    const round = ++this.electionRound;
    const m = this.membership()!;
    const sets = voterSets(m.config);
    const grants = new Set<number>([this.self]);
    const last = this.lastLog();
    this.resetElectionTimer();
    if (this.quorumOf(sets, grants)) {
      this.startElection(false);
      return;
    }
    let started = false;
    for (const id of allVoters(m.config)) {
      if (id === this.self) continue;
      const addr = this.addrOf(id);
      if (!addr) continue;
      this.net
        .call(addr, '/raft/v1/prevote', { term: this.term + 1, candidateId: this.self, lastLogIndex: last.index, lastLogTerm: last.term }, this.cfg.electionMs)
        .then((r) => {
          const b = r.json as { granted?: boolean } | null;
          if (r.status !== 200 || !b?.granted) return;
          grants.add(id);
          if (!started && round === this.electionRound && this.canElect() && this.quorumOf(sets, grants)) {
            started = true;
            this.startElection(false);
          }
        })
        .catch(() => {});
    }
  }

  startElection(transfer: boolean): void {
    if (!this.canElect(transfer)) return;
    const round = ++this.electionRound;
    this.setTerm(this.term + 1, this.self);
    if (this.stopped) return;
    const term = this.term;
    this.state = 'candidate';
    this.leaderId = null;
    this.logger.info('starting election', { term, transfer });
    const m = this.membership()!;
    const sets = voterSets(m.config);
    const grants = new Set<number>([this.self]);
    const last = this.lastLog();
    this.resetElectionTimer();
    if (this.quorumOf(sets, grants)) {
      this.becomeLeader();
      return;
    }
    for (const id of allVoters(m.config)) {
      if (id === this.self) continue;
      const addr = this.addrOf(id);
      if (!addr) continue;
      this.net
        .call(addr, '/raft/v1/vote', { term, candidateId: this.self, lastLogIndex: last.index, lastLogTerm: last.term, transfer }, this.cfg.electionMs)
        .then((r) => {
          const b = r.json as { term?: number; granted?: boolean } | null;
          if (r.status !== 200 || !b) return;
          if ((b.term ?? 0) > this.term) {
            this.stepDown(b.term!, null);
            return;
          }
          if (!b.granted) return;
          grants.add(id);
          if (round === this.electionRound && this.state === 'candidate' && this.term === term && this.quorumOf(sets, grants)) {
            this.becomeLeader();
          }
        })
        .catch(() => {});
    }
  }

  private becomeLeader(): void {
    const now = mono();
    this.state = 'leader';
    this.leaderId = this.self;
    this.leaderRaft = this.ownRaftAddr();
    this.leaderSince = now;
    this.lastQuorumHandoff = now;
    this.handingOff = false;
    this.lastProposedCmd = 0;
    this.progress.clear();
    if (this.electionTimer) this.t.clear(this.electionTimer);
    this.electionTimer = null;
    // A member's recorded progress never moves back: seed it from the last members view this
    // node received (bounded by the commit point every leader shares). With
    // QUEEN_SIM_LEADER_PROGRESS=unknown a new leader knows nothing of the followers until they
    // answer (and then backs off to what each holds, as raft does).
    const seen = new Map<number, number | null>();
    if (this.view && this.cfg.leaderProgress === 'carry') for (const mm of this.view.v.members) seen.set(mm.nodeId, mm.matched);
    const prevLeader = this.view?.v.leaderId ?? null;
    for (const id of this.replicationTargets()) {
      const p = this.newProgress(now);
      const vm = seen.get(id);
      if (vm !== undefined && vm !== null) p.matched = Math.min(vm, this.commitIndex);
      if (id === prevLeader && this.lastLeaderContact > 0) p.ackBase = this.lastLeaderContact;
      this.progress.set(id, p);
    }
    const e = this.appendAsLeader({ kind: 'blank' });
    this.blankIndex = e ? e.index : this.store.lastIndex();
    this.logger.info('elected leader', { term: this.term, blankIndex: this.blankIndex });
    this.advanceCommit();
  }

  private newProgress(ackBase: number | null): Progress {
    return {
      next: this.store.lastIndex() + 1,
      matched: null,
      inflight: false,
      lastAckAt: null,
      ackBase,
      lastSendAt: 0,
      sentCommit: 0,
      snapshotting: false,
      lastProgressAt: mono(),
      backoffUntil: 0,
      kinds: null,
      freeAt: 0,
      ackedSentAt: 0,
    };
  }

  handlePreVote(req: { term: number; candidateId: number; lastLogIndex: number; lastLogTerm: number }): { term: number; granted: boolean } {
    const deny = { term: this.term, granted: false };
    if (this.stopped || !this.running) return deny;
    if (req.term < this.term) return deny;
    const lease = this.leaseMs();
    if (this.state === 'leader') {
      const q = this.quorumAckMs();
      if (q !== null && q < lease) return deny;
    } else if (this.leaderId !== null && mono() - this.lastLeaderContact < lease) {
      return deny;
    }
    const last = this.lastLog();
    const upToDate = req.lastLogTerm > last.term || (req.lastLogTerm === last.term && req.lastLogIndex >= last.index);
    return { term: this.term, granted: upToDate };
  }

  handleVote(req: { term: number; candidateId: number; lastLogIndex: number; lastLogTerm: number }): { term: number; granted: boolean } {
    if (this.stopped || !this.running) return { term: this.term, granted: false };
    if (req.term < this.term) return { term: this.term, granted: false };
    if (req.term > this.term) this.stepDown(req.term, null);
    const last = this.lastLog();
    const upToDate = req.lastLogTerm > last.term || (req.lastLogTerm === last.term && req.lastLogIndex >= last.index);
    const voted = this.store.meta.votedFor;
    if ((voted === null || voted === req.candidateId) && upToDate) {
      this.setTerm(this.term, req.candidateId);
      this.resetElectionTimer();
      return { term: this.term, granted: true };
    }
    return { term: this.term, granted: false };
  }

  // TransferLeader received: start an election at once (skipping pre-vote) when caught up.
  handleTransfer(req: { term: number; from: number; lastLogIndex: number }): { ok: boolean; reason?: string } {
    if (this.stopped || !this.running) return { ok: false, reason: 'stopped' };
    // A node that is shutting down takes the transfer too (F11): see canElect.
    if (!this.isVoter()) return { ok: false, reason: 'not a voter' };
    if (req.term < this.term) return { ok: false, reason: 'stale term' };
    if (this.state === 'leader') return { ok: true };
    if (this.store.lastIndex() < req.lastLogIndex) return { ok: false, reason: 'behind' };
    if (this.state === 'candidate' && this.term > req.term) return { ok: true };
    this.startElection(true);
    return { ok: true };
  }

  handleLeaving(req: { nodeId: number }): void {
    this.handedOff.set(req.nodeId, mono());
  }

  // ---- replication (leader) --------------------------------------------------------------

  replicationTargets(): number[] {
    const m = this.membership();
    if (!m) return [];
    return allMembers(m.config).filter((id) => id !== this.self);
  }

  private kick(): void {
    if (this.kickPending) return;
    this.kickPending = true;
    this.t.setImmediate(() => {
      this.kickPending = false;
      if (this.state !== 'leader') return;
      for (const id of this.replicationTargets()) this.replicate(id);
    });
  }

  private appendAsLeader(partial: { kind: Entry['kind']; cmd?: Command; membership?: MembershipConfig; version?: number }): Entry | null {
    const e: Entry = { index: this.store.lastIndex() + 1, term: this.term, ts: Date.now(), kind: partial.kind };
    if (partial.cmd) e.cmd = partial.cmd;
    if (partial.version !== undefined) e.version = partial.version;
    if (partial.cmd?.t === 'link') {
      // A mirrored entry counts for what its source entry counted for; the link's role rows for nothing.
      if (partial.cmd.op === 'mirror' && partial.cmd.pad) e.pad = partial.cmd.pad;
    } else if (partial.cmd && this.cfg.entryBytes > 0) {
      // Each message of the entry (a KV put, each pushed message) counts for QUEEN_SIM_ENTRY_BYTES:
      // a realistic message with its metadata.
      const messages = partial.cmd.t === 'push' ? partial.cmd.items.length : 1;
      const own = JSON.stringify(e).length + 1;
      if (own < messages * this.cfg.entryBytes) e.pad = messages * this.cfg.entryBytes - own;
    }
    if (partial.membership) e.membership = partial.membership;
    if (!this.persist('raft log', () => this.store.appendEntries([e]))) return null;
    if (e.membership) {
      this.memberships.push({ index: e.index, term: e.term, config: e.membership });
      const now = mono();
      for (const id of this.replicationTargets()) if (!this.progress.has(id)) this.progress.set(id, this.newProgress(null));
      for (const id of [...this.progress.keys()]) if (!this.replicationTargets().includes(id)) this.progress.delete(id);
      void now;
    }
    if (e.kind === 'cmd') this.lastProposedCmd = e.index;
    this.viewCache = null;
    this.kick();
    this.advanceCommit();
    return e;
  }

  private replicate(id: number): void {
    if (this.state !== 'leader' || this.stopped) return;
    const p = this.progress.get(id);
    if (!p || p.inflight) return;
    const addr = this.addrOf(id);
    if (!addr) return;
    const now = mono();
    if (now < p.backoffUntil) return;
    if (p.next - 1 < this.store.purgedIndex) {
      this.sendSnapshot(id, p, addr);
      return;
    }
    const last = this.store.lastIndex();
    // The bandwidth model: entries go out once the link has carried the previous batch;
    // heartbeats (no entries) are never held back.
    const linkFree = this.cfg.bandwidthBytes <= 0 || now >= p.freeAt;
    const hasEntries = p.next <= last && linkFree;
    // A commit the follower has not heard of goes out with the next entries, or on its own once
    // commitNotifyMs passed since the last send: under load each append then carries the commit
    // of the one before, instead of every entry costing a second round trip to say it committed.
    const commitBehind = p.sentCommit < this.commitIndex;
    const due = now - p.lastSendAt >= this.cfg.heartbeatMs || (commitBehind && now - p.lastSendAt >= this.cfg.commitNotifyMs);
    if (!hasEntries && !due) {
      if (p.next <= last && !linkFree) this.replicateAt(id, p.freeAt);
      else if (commitBehind) this.replicateAt(id, p.lastSendAt + this.cfg.commitNotifyMs);
      return;
    }
    const prevIndex = p.next - 1;
    const prevTerm = this.store.termAt(prevIndex) ?? 0;
    let entries = hasEntries ? this.store.slice(p.next, Math.min(last, p.next + this.cfg.appendBatch - 1)) : [];
    if (entries.length > 0 && this.cfg.bandwidthBytes > 0) {
      // At most a fifth of a second of the link per batch, so progress moves smoothly.
      const budget = Math.max(1, this.cfg.bandwidthBytes / 5);
      let bytes = 0;
      let n = 0;
      for (const e of entries) {
        bytes += Store.entryBytes(e);
        n++;
        if (bytes >= budget) break;
      }
      entries = entries.slice(0, n);
      p.freeAt = Math.max(now, p.freeAt) + transferMs(this.cfg, bytes, this.cfg.bandwidthBytes);
    }
    p.inflight = true;
    p.lastSendAt = now;
    p.sentCommit = this.commitIndex;
    const sentAt = now;
    const term = this.term;
    const req: AppendReq = { term, leaderId: this.self, leaderRaft: this.ownRaftAddr(), prevIndex, prevTerm, entries, leaderCommit: this.commitIndex };
    const timeout = Math.max(500, this.cfg.electionMs);
    this.net
      .call(addr, '/raft/v1/append', req, timeout, { 'x-queen-raft-members': JSON.stringify(this.membersView()) })
      .then((r) => {
        p.inflight = false;
        this.onAppendReply(id, p, term, r.status, r.json as AppendReply | null, sentAt);
      })
      .catch(() => {
        p.inflight = false;
        p.backoffUntil = mono() + this.cfg.heartbeatMs;
      })
      .finally(() => {
        if (this.state === 'leader' && this.term === term && (p.next <= this.store.lastIndex() || p.sentCommit < this.commitIndex)) {
          this.t.setImmediate(() => this.replicate(id));
        }
      });
  }

  // Replicates to `id` again at `at` (mono), once: the link is busy until then.
  private replicateTimers = new Map<number, NodeJS.Timeout>();
  private replicateAt(id: number, at: number): void {
    if (this.replicateTimers.has(id)) return;
    const timer = this.t.setTimeout(() => {
      this.replicateTimers.delete(id);
      this.replicate(id);
    }, Math.max(1, at - mono()));
    if (timer) this.replicateTimers.set(id, timer);
  }

  private onAppendReply(id: number, p: Progress, term: number, status: number, b: AppendReply | null, sentAt: number): void {
    if (this.state !== 'leader' || this.term !== term) return;
    if (status !== 200 || !b) {
      p.backoffUntil = mono() + this.cfg.heartbeatMs;
      return;
    }
    if (b.term > this.term) {
      this.stepDown(b.term, null);
      return;
    }
    const now = mono();
    p.lastAckAt = now;
    p.ackedSentAt = Math.max(p.ackedSentAt, sentAt);
    this.onQuorumAck();
    p.kinds = b.kinds ?? p.kinds;
    if (b.success) {
      const mi = b.matchIndex ?? 0;
      if (p.matched === null || mi > p.matched) {
        p.matched = mi;
        p.lastProgressAt = now;
      }
      p.next = Math.max(mi, p.matched) + 1;
      p.snapshotting = false;
      this.advanceCommit();
    } else {
      // The recorded progress never moves back (openraft allow_log_reversion off): a follower
      // that lost entries it had acknowledged is never repaired by this leader.
      const floor = (p.matched ?? 0) + 1;
      p.next = Math.max(floor, b.hint ?? 1);
      p.backoffUntil = now + this.cfg.heartbeatMs;
    }
  }

  private sendSnapshot(id: number, p: Progress, addr: string): void {
    if (this.store.stateJson === '' || this.store.stateIndex < this.store.purgedIndex) return;
    const snapIndex = this.store.stateIndex;
    const snapTerm = this.store.stateTerm;
    p.inflight = true;
    p.snapshotting = true;
    p.matched = null;
    p.lastSendAt = mono();
    const term = this.term;
    const raw = `{"term":${term},"leaderId":${this.self},"leaderRaft":${JSON.stringify(this.ownRaftAddr())},"snapshot":{"index":${snapIndex},"term":${snapTerm},"state":${this.store.stateJson}}}`;
    // Its size on the wire: the saved state with its padding. The transfer takes size / bandwidth
    // and gives up after 60 s + size / 10 MB/s (§4), both scaled by the time factor.
    const bytes = raw.length + this.store.snapshotBytes() - this.store.stateJson.length;
    const timeout = Math.max(1000, (60_000 + bytes / 10_000) * (this.cfg.bandwidthBytes > 0 ? this.cfg.timeFactor : 1));
    const transfer = transferMs(this.cfg, bytes, this.cfg.bandwidthBytes);
    this.logger.info('sending snapshot', { to: id, index: snapIndex, bytes, transferMs: Math.round(transfer) });
    const stillLeading = () => this.state === 'leader' && this.term === term && !this.stopped;
    const streamed = (async (): Promise<boolean> => {
      if (transfer <= 0) return true;
      // Streamed in chunks: the receiver acknowledges each (so it stays live in the view); one
      // that stops answering ends the transfer.
      const until = mono() + Math.min(transfer, timeout);
      let lastChunk = mono();
      let silent = 0;
      while (mono() < until && stillLeading()) {
        await this.t.sleep(Math.min(100, Math.max(1, until - mono())));
        if (mono() - lastChunk < 500) continue;
        lastChunk = mono();
        const alive = await this.net.call(addr, '/raft/v1/state', {}, 400).then((r) => r.status === 200, () => false);
        if (alive) {
          silent = 0;
          p.lastAckAt = mono();
        } else if (++silent >= 3) {
          this.logger.warn('snapshot transfer broke off: the receiver stopped answering', { to: id });
          return false;
        }
      }
      if (!stillLeading()) return false;
      if (transfer > timeout) {
        this.logger.warn('snapshot transfer timed out: the link is too slow for its size', { to: id, bytes, timeoutMs: Math.round(timeout) });
        return false;
      }
      return true;
    })();
    void streamed
      .then((ok) => {
        if (!ok) throw new Unreachable('snapshot not delivered');
        return this.net.call(addr, '/raft/v1/snapshot', new RawJson(raw), Math.max(1000, timeout - transfer));
      })
      .then((r) => {
        p.inflight = false;
        const b = r.json as { term?: number; ok?: boolean } | null;
        if (this.state !== 'leader' || this.term !== term) return;
        if (b && (b.term ?? 0) > this.term) {
          this.stepDown(b.term!, null);
          return;
        }
        if (r.status === 200 && b?.ok) {
          p.lastAckAt = mono();
          p.next = snapIndex + 1;
        } else {
          p.backoffUntil = mono() + 1000;
        }
      })
      .catch(() => {
        p.inflight = false;
        p.backoffUntil = mono() + 1000;
      });
  }

  private advanceCommit(): void {
    if (this.state !== 'leader' || this.stopped) return;
    const m = this.membership();
    if (!m) return;
    let n = Infinity;
    for (const set of voterSets(m.config)) {
      const vals = set.map((id) => (id === this.self ? this.store.lastIndex() : (this.progress.get(id)?.matched ?? 0))).sort((a, b) => b - a);
      n = Math.min(n, vals[Math.floor(set.length / 2)] ?? 0);
    }
    if (n > this.commitIndex && n !== Infinity && this.store.termAt(n) === this.term) this.setCommit(n);
  }

  private setCommit(n: number): void {
    if (n <= this.commitIndex) return;
    this.commitIndex = n;
    if (!this.persist('commit', () => this.store.saveCommit(n))) return;
    if (this.state === 'leader') {
      const still: typeof this.commitWaiters = [];
      for (const w of this.commitWaiters) (w.index <= n ? w.resolve(true) : still.push(w));
      this.commitWaiters = still;
      this.kick();
      this.afterLeaderCommit();
    }
    this.scheduleApply();
  }

  private afterLeaderCommit(): void {
    const m = this.membership()!;
    if (m.index > this.commitIndex) return;
    if (this.crashAfterJoint && m.config.joint) {
      this.logger.warn('simulated crash after the joint configuration committed (/_sim/fault)', { index: m.index });
      this.onFatalExit(137);
      return;
    }
    if (!m.config.joint && !allMembers(m.config).includes(this.self)) {
      // Removed from the cluster: tell the rest about the commit, then step down.
      const term = this.term;
      this.t.setTimeout(() => {
        if (this.state === 'leader' && this.term === term) {
          this.logger.info('this node is no longer a member; stepping down');
          this.stepDown(this.term, null);
        }
      }, this.cfg.heartbeatMs);
    }
  }

  private waitCommit(index: number): Promise<boolean> {
    if (this.state !== 'leader') return Promise.resolve(false);
    if (this.commitIndex >= index) return Promise.resolve(true);
    return new Promise((resolve) => this.commitWaiters.push({ index, term: this.term, resolve }));
  }

  // ---- reads (ReadIndex) -----------------------------------------------------------------

  private hasQuorumSince(since: number): boolean {
    const m = this.membership();
    if (!m) return false;
    return voterSets(m.config).every(
      (set) => set.filter((id) => id === this.self || (this.progress.get(id)?.ackedSentAt ?? -1) >= since).length >= Math.floor(set.length / 2) + 1,
    );
  }

  private onQuorumAck(): void {
    if (this.quorumWaiters.length === 0) return;
    const still: typeof this.quorumWaiters = [];
    for (const w of this.quorumWaiters) (this.hasQuorumSince(w.since) ? w.resolve(true) : still.push(w));
    this.quorumWaiters = still;
  }

  /**
   * ReadIndex: the leader's commit index, once a round of heartbeats sent after the read began
   * was answered by a majority of the voters (a leader cut off from its majority cannot serve a
   * read). Null when that does not happen within `timeoutMs`, or this node does not lead.
   */
  async readIndex(timeoutMs: number): Promise<number | null> {
    if (!this.isLeaderReady()) return null;
    const since = mono();
    const term = this.term;
    const commit = this.commitIndex;
    if (!this.hasQuorumSince(since)) {
      for (const id of this.replicationTargets()) {
        const p = this.progress.get(id);
        if (p) p.lastSendAt = 0;
        this.replicate(id);
      }
      const ok = await new Promise<boolean>((resolve) => {
        const w = {
          since,
          resolve: (v: boolean) => {
            this.t.clear(timer);
            resolve(v);
          },
        };
        const timer = this.t.setTimeout(() => {
          this.quorumWaiters = this.quorumWaiters.filter((x) => x !== w);
          resolve(false);
        }, timeoutMs);
        this.quorumWaiters.push(w);
      });
      if (!ok) return null;
    }
    return this.state === 'leader' && this.term === term ? commit : null;
  }

  /** A linearizable read point on any node: the leader's ReadIndex, applied here. Null: no quorum, or no leader. */
  async linearizableRead(deadline: number): Promise<boolean> {
    let index: number | null = null;
    if (this.state === 'leader') {
      index = await this.readIndex(Math.max(1, Math.min(1000, deadline - mono())));
    } else if (this.leaderId !== null) {
      const addr = this.addrOf(this.leaderId);
      if (addr) {
        try {
          const r = await this.net.call(addr, '/raft/v1/read_index', {}, Math.max(1, Math.min(1500, deadline - mono())));
          const b = r.json as { commit?: number } | null;
          if (r.status === 200 && b && typeof b.commit === 'number') index = b.commit;
        } catch {
          index = null;
        }
      }
    }
    if (index === null) return false;
    while (this.sm.applied < index && mono() < deadline && !this.isStopped()) await this.t.sleep(10);
    return this.sm.applied >= index;
  }

  // ---- follower side ---------------------------------------------------------------------

  handleAppend(req: AppendReq, viewHeader: string | undefined): { status: number; body: AppendReply | { error: string } } {
    if (this.stopped || !this.running) return { status: 503, body: { error: 'raft is stopped on this node' } };
    const last = this.store.lastIndex();
    if (req.term < this.term) return { status: 200, body: { term: this.term, success: false, hint: last + 1, lastLogIndex: last, kinds: this.cfg.kinds } };
    if (req.term > this.term) this.setTerm(req.term, null);
    if (this.state !== 'follower') this.becomeFollowerState();
    this.leaderId = req.leaderId;
    if (req.leaderRaft) this.leaderRaft = req.leaderRaft;
    this.lastLeaderContact = mono();
    this.resetElectionTimer();
    if (viewHeader) {
      try {
        this.view = { v: JSON.parse(viewHeader) as MembersView, at: mono() };
      } catch {
        // ignore a damaged view
      }
    }
    const reply = (success: boolean, extra: Partial<AppendReply>) => ({
      status: 200,
      body: { term: this.term, success, lastLogIndex: this.store.lastIndex(), kinds: this.cfg.kinds, ...extra } as AppendReply,
    });
    const prev = req.prevIndex;
    if (prev > last) return reply(false, { hint: last + 1 });
    if (prev >= this.store.purgedIndex) {
      const t = this.store.termAt(prev);
      if (t !== req.prevTerm) return reply(false, { hint: Math.max(1, Math.min(this.commitIndex + 1, prev)) });
    }
    let fresh: Entry[] = [];
    for (let i = 0; i < req.entries.length; i++) {
      const e = req.entries[i]!;
      if (e.index <= this.store.purgedIndex) continue;
      const have = this.store.entry(e.index);
      if (have && have.term === e.term) continue;
      if (have) {
        this.store.truncateFrom(e.index);
        while (this.memberships.length > 0 && this.memberships[this.memberships.length - 1]!.index >= e.index) this.memberships.pop();
      }
      fresh = req.entries.slice(i);
      break;
    }
    if (fresh.length > 0) {
      if (!this.persist('raft log', () => this.store.appendEntries(fresh))) return { status: 503, body: { error: 'raft is stopped on this node' } };
      const wasVoter = this.isVoter();
      for (const e of fresh) if (e.kind === 'membership' && e.membership) this.memberships.push({ index: e.index, term: e.term, config: e.membership });
      if (!wasVoter && this.isVoter()) this.resetElectionTimer();
    }
    const lastNew = prev + req.entries.length;
    if (req.leaderCommit > this.commitIndex) this.setCommit(Math.min(req.leaderCommit, lastNew));
    return reply(true, { matchIndex: lastNew });
  }

  // A snapshot from the leader: stage it, stop, exit 75 so the supervisor restarts the node.
  handleSnapshot(req: { term: number; leaderId: number; snapshot: SnapshotPayload }): { status: number; body: unknown } {
    if (this.stopped || !this.running) return { status: 503, body: { error: 'raft is stopped on this node' } };
    if (req.term < this.term) return { status: 200, body: { term: this.term, ok: false } };
    if (req.term > this.term) this.setTerm(req.term, null);
    this.leaderId = req.leaderId;
    this.lastLeaderContact = mono();
    if (!this.persist('snapshot', () => this.store.stageSnapshot(req.snapshot))) return { status: 503, body: { error: 'disk full' } };
    this.logger.info('snapshot received and staged; restart required to install it', { index: req.snapshot.index, term: req.snapshot.term });
    this.stop('snapshot', 'a received snapshot waits for the restart');
    this.t.setTimeout(() => {
      this.logger.info('exiting with code 75 to install the staged snapshot');
      this.onFatalExit(75);
    }, 150);
    return { status: 200, body: { term: this.term, ok: true } };
  }

  private probeLeaderCommit(): void {
    if (this.stopped || this.state === 'leader' || this.leaderId === null) return;
    const addr = this.addrOf(this.leaderId);
    if (!addr) return;
    this.net
      .call(addr, '/raft/v1/read_index', {}, 500)
      .then((r) => {
        const b = r.json as { commit?: number } | null;
        if (r.status === 200 && b && typeof b.commit === 'number') this.commitReading = { commit: b.commit, at: mono() };
      })
      .catch(() => {});
  }

  // ---- apply -----------------------------------------------------------------------------

  scheduleApply(): void {
    if (this.applyScheduled) return;
    this.applyScheduled = true;
    this.t.setImmediate(() => {
      this.applyScheduled = false;
      this.applyBatch();
    });
  }

  private applyBatch(): void {
    let n = 0;
    while (!this.isStopped() && this.sm.applied < this.commitIndex && n < 2000) {
      const e = this.store.entry(this.sm.applied + 1);
      if (!e) break;
      const digest = entryDigest(e);
      let result: unknown = null;
      const skip = this.cfg.applySkip.find((s) => s.index === e.index && s.digest === digest);
      if (skip) {
        skipEntry(this.sm, e, digest);
        this.logger.warn('skipped entry (QUEEN_RAFT_APPLY_SKIP)', { index: e.index, term: e.term, digest });
        this.persist('state', () => this.store.saveState(this.sm));
        result = { skipped: true };
      } else {
        try {
          result = applyEntry(this.sm, e);
        } catch (err) {
          if (err instanceof PoisonError) {
            this.applyFailed(e, digest, err.message);
            return;
          }
          throw err;
        }
      }
      n++;
      this.stateDirty = true;
      this.recentResults.set(e.index, { term: e.term, result });
      if (this.recentResults.size > 20000) {
        const first = this.recentResults.keys().next().value;
        if (first !== undefined) this.recentResults.delete(first);
      }
      const ws = this.applyWaiters.get(e.index);
      if (ws) {
        this.applyWaiters.delete(e.index);
        for (const w of ws) w.resolve(w.term === e.term ? { ok: true, result } : { ok: false, code: 'outcome_unknown' });
      }
      if (this.state === 'leader' && e.index === this.blankIndex) this.logger.info('leader applied its blank entry', { term: this.term, index: e.index });
    }
    if (!this.isStopped() && this.sm.applied < this.commitIndex) this.scheduleApply();
  }

  private applyFailed(e: Entry, digest: string, error: string): void {
    this.applyFailure = { index: e.index, term: e.term, digest, kind: e.kind, error };
    this.logger.error(
      `raft.apply.failure: apply refused entry ${e.index}; set QUEEN_RAFT_APPLY_SKIP=${e.index}:${digest} on EVERY node and restart them all`,
      { index: e.index, term: e.term, digest, error },
    );
    this.persist('state', () => this.store.saveState(this.sm));
    for (const [, ws] of this.applyWaiters) for (const w of ws) w.resolve({ ok: false, code: 'stopped' });
    this.applyWaiters.clear();
    if (this.state === 'leader') {
      // Keep replicating for a few heartbeats so that the followers learn the commit point and
      // stop at the same entry, then stop.
      this.t.setTimeout(() => this.stop('apply', error), Math.max(200, 4 * this.cfg.heartbeatMs));
    } else {
      this.stop('apply', error);
    }
  }

  waitApplied(index: number, term: number, deadline: number): Promise<{ ok: boolean; result?: unknown; code?: string }> {
    const done = this.recentResults.get(index);
    if (done) return Promise.resolve(done.term === term ? { ok: true, result: done.result } : { ok: false, code: 'outcome_unknown' });
    if (this.sm.applied >= index) return Promise.resolve({ ok: false, code: 'outcome_unknown' });
    if (this.isStopped()) return Promise.resolve({ ok: false, code: 'stopped' });
    return new Promise((resolve) => {
      const w = {
        term,
        resolve: (r: { ok: boolean; result?: unknown; code?: string }) => {
          this.t.clear(timer);
          resolve(r);
        },
      };
      const timer = this.t.setTimeout(() => {
        const ws = this.applyWaiters.get(index);
        if (ws) {
          const i = ws.indexOf(w);
          if (i >= 0) ws.splice(i, 1);
          if (ws.length === 0) this.applyWaiters.delete(index);
        }
        resolve({ ok: false, code: 'timeout' });
      }, Math.max(0, deadline - mono()));
      let ws = this.applyWaiters.get(index);
      if (!ws) {
        ws = [];
        this.applyWaiters.set(index, ws);
      }
      ws.push(w);
    });
  }

  private maybePurge(): void {
    const keep = this.cfg.logKeep;
    let limit = Math.min(this.store.stateIndex, this.sm.applied) - keep;
    // A standby that reads this log holds it too (link.ts).
    if (this.link) limit = Math.min(limit, this.link.purgeFloor());
    if (this.state === 'leader') {
      const now = mono();
      const hold = this.cfg.purgeHoldMs;
      const last = this.store.lastIndex();
      for (const p of this.progress.values()) {
        const need = p.matched ?? p.next - 1;
        const ack = p.lastAckAt ?? p.ackBase;
        const live = (p.matched !== null && p.matched >= last) || (ack !== null && now - ack < hold) || now - p.lastProgressAt < hold;
        if (live) limit = Math.min(limit, need);
      }
    }
    if (limit - this.store.purgedIndex >= Math.max(1, Math.floor(keep / 4))) {
      const before = this.store.purgedIndex;
      if (this.persist('raft log purge', () => this.store.purgeTo(limit))) {
        this.logger.debug('purged log', { from: before + 1, to: limit });
      }
    }
  }

  // ---- commands (KV, push, pop) ----------------------------------------------------------

  private resumePlanner(): void {
    this.plannerPaused = false;
    const ws = this.pauseWaiters;
    this.pauseWaiters = [];
    for (const w of ws) w();
  }

  // Leader side: append a command once the planner is not paused.
  async proposeLocal(cmd: Command, deadline: number): Promise<{ ok: true; index: number; term: number } | { ok: false; code: string }> {
    while (this.plannerPaused && this.state === 'leader') {
      const left = deadline - mono();
      if (left <= 0) return { ok: false, code: 'timeout' };
      await new Promise<void>((r) => {
        const t = this.t.setTimeout(r, Math.min(left, 200));
        this.pauseWaiters.push(() => {
          this.t.clear(t);
          r();
        });
      });
    }
    if (!this.isLeaderReady() || this.handingOff) return { ok: false, code: 'retry' };
    const e = this.appendAsLeader({ kind: 'cmd', cmd });
    if (!e) return { ok: false, code: 'stopped' };
    return { ok: true, index: e.index, term: e.term };
  }

  private knowsLeader(): boolean {
    return this.state === 'leader' || this.leaderId !== null;
  }

  async execute(cmd: Command): Promise<Answer> {
    const deadline = mono() + this.cfg.stmtTimeoutMs;
    if (this.isStopped()) return retry503(null, 'raft is stopped on this node; retry against another node');
    const standby = this.link?.refuseWrite(cmd);
    if (standby) return standby;
    let placed: { index: number; term: number } | null = null;
    // No leader known: an election (a SIGTERM hand-off takes milliseconds) is given up to one
    // election timeout to produce one before the client is told to retry.
    if (!this.knowsLeader()) {
      const until = mono() + Math.min(2 * this.cfg.electionMs, Math.max(0, deadline - mono()));
      while (!this.knowsLeader() && mono() < until && !this.isStopped()) await this.t.sleep(20);
      if (!this.knowsLeader()) return retry503(null);
    }
    while (placed === null) {
      if (this.isStopped()) return retry503(null, 'raft is stopped on this node; retry against another node');
      if (mono() >= deadline) return this.timeoutAnswer();
      if (this.state === 'leader') {
        const r = await this.proposeLocal(cmd, deadline);
        if (r.ok) placed = { index: r.index, term: r.term };
        else if (r.code === 'timeout') return this.timeoutAnswer();
        else if (r.code === 'stopped') return retry503(null, 'raft is stopped on this node; retry against another node');
        else if (this.handingOff) return retry503(null, 'leadership is being handed off; retry');
        else await this.t.sleep(50);
        continue;
      }
      const leader = this.leaderId;
      const addr = leader !== null ? this.addrOf(leader) : null;
      if (leader === null || addr === null) {
        await this.t.sleep(100);
        continue;
      }
      try {
        const left = Math.max(1, deadline - mono());
        const r = await this.net.call(addr, '/raft/v1/submit', { cmd, timeoutMs: left }, left + 1000);
        const b = r.json as { ok?: boolean; index?: number; term?: number } | null;
        if (r.status === 200 && b?.ok) placed = { index: b.index!, term: b.term! };
        else await this.t.sleep(100);
      } catch {
        await this.t.sleep(100);
      }
    }
    const w = await this.waitApplied(placed.index, placed.term, deadline);
    if (w.ok) return { status: 200, body: w.result };
    if (w.code === 'timeout') return this.timeoutAnswer();
    if (w.code === 'stopped') return retry503(null, 'raft is stopped on this node; the write may or may not have applied');
    return {
      status: 503,
      body: { error: 'the leader changed during the write; it may or may not have applied', code: 'outcome_unknown' },
      headers: { 'retry-after': '1' },
    };
  }

  private timeoutAnswer(): Answer {
    return { status: 503, body: { error: 'request deadline elapsed', code: 'timeout' }, headers: { 'retry-after': '1' } };
  }

  async handleSubmit(req: { cmd: Command; timeoutMs: number }): Promise<unknown> {
    if (this.state !== 'leader' || this.isStopped()) return { ok: false, code: 'retry', leader_hint: this.leaderId };
    const r = await this.proposeLocal(req.cmd, mono() + Math.min(req.timeoutMs, this.cfg.stmtTimeoutMs));
    if (r.ok) return r;
    return { ok: false, code: r.code, leader_hint: this.leaderId };
  }

  // ---- figures ---------------------------------------------------------------------------

  private ackMs(p: Progress | undefined, now: number): number | null {
    if (!p) return null;
    const t = p.lastAckAt ?? p.ackBase;
    return t === null ? null : Math.max(0, Math.round(now - t));
  }

  private leaderQuorumAckMs(now: number): number {
    const m = this.membership()!;
    let q = 0;
    for (const set of voterSets(m.config)) {
      const silences = set
        .map((id) => (id === this.self ? 0 : (this.ackMs(this.progress.get(id), now) ?? Math.round(now - this.leaderSince))))
        .sort((a, b) => a - b);
      q = Math.max(q, silences[Math.floor(set.length / 2)] ?? 0);
    }
    return q;
  }

  quorumAckMs(): number | null {
    const now = mono();
    if (this.state === 'leader' && !this.stopped) return this.leaderQuorumAckMs(now);
    if (!this.view || this.view.v.quorumAckMs === null) return null;
    return Math.round(this.view.v.quorumAckMs + (now - this.view.at));
  }

  membersView(): MembersView {
    const now = mono();
    if (this.viewCache && now - this.viewCache.at < 100) return this.viewCache.v;
    const m = this.membership()!;
    const v: MembersView = {
      leaderId: this.self,
      term: this.term,
      quorumAckMs: this.leaderQuorumAckMs(now),
      commit: this.commitIndex,
      members: allMembers(m.config).map((id) =>
        id === this.self
          ? { nodeId: id, matched: this.store.lastIndex(), lastAckMs: 0 }
          : { nodeId: id, matched: this.progress.get(id)?.matched ?? null, lastAckMs: this.ackMs(this.progress.get(id), now) },
      ),
    };
    this.viewCache = { v, at: now };
    return v;
  }

  lag(): number {
    if (this.state === 'leader' && !this.stopped) return 0;
    const now = mono();
    let reading: number | null = null;
    if (this.commitReading && now - this.commitReading.at <= 5000) reading = this.commitReading.commit;
    else if (this.view && now - this.view.at <= 5000) reading = this.view.v.commit;
    if (reading === null) return 0;
    if (reading - this.sm.applied <= this.cfg.readyLagEntries) return 0;
    if (this.cfg.legacy && this.sm.applied === 0) return 0;
    return Math.max(1, Date.now() - this.sm.appliedTs);
  }

  health(): { ready: boolean; body: Record<string, unknown> } {
    const leaderKnown = this.leaderId !== null && !this.isStopped();
    const lag = this.lag();
    const q = this.quorumAckMs();
    const quorumOk = this.cfg.readyQuorumMs === 0 || this.cfg.legacy || (q !== null && q <= this.cfg.readyQuorumMs);
    const broken = this.cfg.neverReady || (this.cfg.breaksOnRaise && this.clusterVersion() >= this.cfg.kinds);
    const ready = leaderKnown && lag <= this.cfg.readyLagMs && quorumOk && !broken;
    const linkView = this.link?.view() ?? null;
    const body = {
      status: ready ? 'healthy' : 'settling',
      engine: 'raft',
      version: this.cfg.version,
      raft: {
        role: this.role(),
        leader: leaderKnown,
        term: this.term,
        applied: this.sm.applied,
        commit: this.commitIndex,
        lag,
        quorumAckMs: q,
        storageReady: !this.isStopped(),
        clusterVersion: this.clusterVersion(),
        kinds: this.cfg.kinds,
        apply: { skipped: this.sm.skipped, failure: this.applyFailure },
        ...(linkView ? { link: linkView } : {}),
      },
    };
    return { ready, body };
  }

  private liveWithin(): number {
    return liveWithinMs(this.cfg);
  }

  private memberLive(id: number, now: number): boolean {
    if (id === this.self) return true;
    const ms = this.ackMs(this.progress.get(id), now);
    return ms !== null && ms < this.liveWithin();
  }

  private viewCommon(m: { index: number; config: MembershipConfig }): Record<string, unknown> {
    return {
      voters: allVoters(m.config),
      learners: sorted(m.config.learners),
      joint: m.config.joint ? [sorted(m.config.joint[0]), sorted(m.config.joint[1])] : null,
      membershipIndex: m.index,
      membershipCommitted: m.index <= this.commitIndex,
      changeInFlight: m.config.joint !== null || m.index > this.commitIndex,
      lastLogIndex: this.store.lastIndex(),
      committedIndex: this.commitIndex,
      liveWithinMs: this.liveWithin(),
      promoteMaxLag: this.cfg.promoteMaxLag,
      clusterVersion: this.clusterVersion(),
    };
  }

  leaderMembershipView(): Record<string, unknown> {
    const now = mono();
    const m = this.membership()!;
    const top = this.store.lastIndex();
    const voters = allVoters(m.config);
    return {
      nodeId: this.self,
      source: 'leader',
      viewAgeMs: 0,
      leader: this.self,
      term: this.term,
      ...this.viewCommon(m),
      members: allMembers(m.config).map((id) => {
        const addrs = m.config.nodes[String(id)] ?? { raft: null, http: null };
        if (id === this.self) {
          return { nodeId: id, voter: voters.includes(id), raft: addrs.raft, http: addrs.http, matched: top, lag: 0, lastAckMs: 0, live: true, kinds: this.cfg.kinds };
        }
        const p = this.progress.get(id);
        const matched = p?.matched ?? null;
        return {
          nodeId: id,
          voter: voters.includes(id),
          raft: addrs.raft,
          http: addrs.http,
          matched,
          lag: matched === null ? null : top - matched,
          lastAckMs: this.ackMs(p, now),
          live: this.memberLive(id, now),
          kinds: p?.kinds ?? null,
        };
      }),
    };
  }

  ownMembershipView(): Record<string, unknown> {
    const now = mono();
    const m = this.membership();
    const source = this.isStopped() ? 'stopped' : 'follower';
    const base: Record<string, unknown> = {
      nodeId: this.self,
      source,
      viewAgeMs: this.view ? Math.round(now - this.view.at) : null,
      leader: this.isStopped() ? null : this.leaderId,
      term: this.term,
    };
    if (!m) {
      return {
        ...base,
        voters: [],
        learners: [],
        joint: null,
        membershipIndex: null,
        membershipCommitted: false,
        changeInFlight: false,
        lastLogIndex: this.store.lastIndex(),
        committedIndex: this.commitIndex,
        liveWithinMs: this.liveWithin(),
        promoteMaxLag: this.cfg.promoteMaxLag,
        clusterVersion: this.clusterVersion(),
        members: [],
      };
    }
    const voters = allVoters(m.config);
    const v = this.view && !this.isStopped() ? this.view : null;
    const age = v ? now - v.at : 0;
    const byId = new Map<number, { matched: number | null; lastAckMs: number | null }>();
    let top: number | null = null;
    if (v) {
      for (const mm of v.v.members) {
        byId.set(mm.nodeId, mm);
        if (mm.matched !== null && (top === null || mm.matched > top)) top = mm.matched;
      }
    }
    return {
      ...base,
      ...this.viewCommon(m),
      members: allMembers(m.config).map((id) => {
        const addrs = m.config.nodes[String(id)] ?? { raft: null, http: null };
        const mm = byId.get(id);
        let matched: number | null = mm ? mm.matched : null;
        if (v && id === v.v.leaderId) matched = top;
        const lastAckMs = mm && mm.lastAckMs !== null ? Math.round(mm.lastAckMs + age) : null;
        return {
          nodeId: id,
          voter: voters.includes(id),
          raft: addrs.raft,
          http: addrs.http,
          matched,
          lag: matched !== null && top !== null ? top - matched : null,
          lastAckMs,
          live: lastAckMs !== null && lastAckMs < this.liveWithin(),
          kinds: null,
        };
      }),
    };
  }

  // ---- membership changes (§2) -----------------------------------------------------------

  singleNode(): boolean {
    return this.cfg.peers.length === 0;
  }

  async getMembership(timeoutMs: number): Promise<Answer> {
    if (this.isStopped() || !this.initialized()) return { status: 200, body: { engine: 'raft', membership: this.ownMembershipView() } };
    if (this.state === 'leader') return { status: 200, body: { engine: 'raft', membership: this.leaderMembershipView() } };
    const leader = this.leaderId;
    const addr = leader !== null ? this.addrOf(leader) : null;
    if (addr) {
      try {
        const r = await this.net.call(addr, '/raft/v1/members', {}, Math.min(timeoutMs, 5000));
        if (r.status === 200 && r.json) return { status: 200, body: r.json };
      } catch {
        // fall through to the own view
      }
    }
    return { status: 200, body: { engine: 'raft', membership: this.ownMembershipView() } };
  }

  async change(op: ChangeOp, timeoutMs: number): Promise<Answer> {
    if (this.singleNode()) {
      return refusal(400, 'unsupported', 'this node runs as a single voter without QUEEN_RAFT_PEERS; membership changes are not supported');
    }
    if (this.isStopped()) return { status: 500, body: { ok: false, code: 'internal', error: `raft is stopped on this node (${this.stopped?.reason ?? 'apply'})` } };
    if (this.state === 'leader') return this.leaderChange(op, timeoutMs);
    const leader = this.leaderId;
    const addr = leader !== null ? this.addrOf(leader) : null;
    if (leader === null || addr === null || !this.initialized()) return retry503(leader);
    try {
      const r = await this.net.call(addr, '/raft/v1/membership', { op, timeoutMs }, timeoutMs + 1000);
      const b = r.json as { status?: number; body?: unknown; headers?: Record<string, string> } | null;
      if (r.status !== 200 || !b || typeof b.status !== 'number') throw new Unreachable(`status ${r.status}`);
      return { status: b.status, body: b.body, headers: b.headers ?? {} };
    } catch {
      return refusal(503, 'leader_unreachable', `could not reach the leader (node ${leader}) over its raft port; the change may or may not have been made: read the membership before repeating`);
    }
  }

  // The forwarded change on the leader's raft port: always 200 with the answer inside.
  async handleForwardedChange(req: { op: ChangeOp; timeoutMs: number }): Promise<unknown> {
    const a = this.state === 'leader' && !this.isStopped() ? await this.leaderChange(req.op, req.timeoutMs) : retry503(this.leaderId);
    const b = a.body as { ok?: boolean; code?: string; error?: string };
    return { ok: b.ok === true, code: b.code ?? null, message: b.error ?? null, leader_hint: this.leaderId, status: a.status, body: a.body, headers: a.headers ?? {} };
  }

  private quorumFails(set: number[], now: number): boolean {
    const live = set.filter((id) => this.memberLive(id, now)).length;
    return live < Math.floor(set.length / 2) + 1;
  }

  private noQuorum(set: number[]): Answer {
    return refusal(409, 'no_quorum', `too few live voters in [${sorted(set).join(',')}] for this change. Bring members back, or remove dead voters one at a time while a majority is live`);
  }

  private behind(ids: number[]): Answer | null {
    const now = mono();
    const last = this.store.lastIndex();
    for (const id of ids) {
      const p = this.progress.get(id);
      const matched = p?.matched ?? null;
      const live = this.memberLive(id, now);
      if (matched === null || last - matched > this.cfg.promoteMaxLag || !live) {
        return refusal(
          409,
          'learner_behind',
          `node ${id} is not caught up: matched ${matched === null ? 'unknown' : matched}, leader last ${last} (max lag ${this.cfg.promoteMaxLag}), ${live ? 'live' : 'not live'}; wait for it to catch up`,
        );
      }
    }
    return null;
  }

  private async leaderChange(op: ChangeOp, timeoutMs: number): Promise<Answer> {
    if (!this.isLeaderReady()) return retry503(null);
    if (this.changeLock) return refusal(409, 'in_flight', 'another membership change is running on the leader; retry');
    this.changeLock = true;
    let release = true;
    try {
      const start = mono();
      const deadline = start + timeoutMs;
      const now = start;
      const m = this.membership()!;
      const cfg = m.config;
      if (m.index > this.commitIndex) return refusal(409, 'in_flight', 'the membership entry in effect is not committed yet; retry');
      const voters = sorted(cfg.voters);
      let target: MembershipConfig;
      let useJoint = false;
      if (cfg.joint) {
        if (op.op === 'voters' && sameSet(op.voters, cfg.joint[1])) {
          target = { ...cfg, voters: sorted(cfg.joint[1]), joint: null, nodes: this.pickNodes(cfg, [...cfg.joint[1], ...cfg.learners]) };
        } else {
          return refusal(
            409,
            'in_flight',
            `a joint configuration [[${cfg.joint[0].join(',')}],[${cfg.joint[1].join(',')}]] is in effect; finish it with PUT voters = [${cfg.joint[1].join(',')}]`,
          );
        }
      } else {
        switch (op.op) {
          case 'learner': {
            if (op.id === 0) return refusal(400, 'bad_request', 'node ids start at 1');
            if (!isHostPort(op.raft) || !isHostPort(op.http)) return refusal(400, 'bad_request', 'raft and http must be host:port');
            if (voters.includes(op.id)) return refusal(409, 'already_voter', `node ${op.id} is already a voter`);
            if (cfg.learners.includes(op.id)) {
              const cur = cfg.nodes[String(op.id)];
              if (cur && cur.raft === op.raft && cur.http === op.http) return this.okView();
              return refusal(409, 'address_mismatch', `node ${op.id} is already a learner with other addresses (${cur?.raft}/${cur?.http}); remove it first`);
            }
            const cv = this.clusterVersion();
            if (cv >= 4) {
              let kinds: number | null = null;
              try {
                const r = await this.net.call(op.raft, '/raft/v1/state', {}, Math.max(1, Math.min(1000, deadline - mono())));
                const b = r.json as { kinds?: number } | null;
                if (r.status === 200 && b && typeof b.kinds === 'number') kinds = b.kinds;
              } catch {
                kinds = null;
              }
              if (kinds === null) return refusal(409, 'kinds_unknown', `node ${op.id} does not answer on ${op.raft}; start it (QUEEN_RAFT_JOIN=true) before adding it`);
              if (kinds < cv) return refusal(409, 'kinds_behind', `node ${op.id} reads catalogue version ${kinds} but the cluster is at ${cv}; upgrade it first`);
            }
            target = {
              ...cfg,
              learners: sorted([...cfg.learners, op.id]),
              nodes: { ...cfg.nodes, [String(op.id)]: { raft: op.raft, http: op.http } },
            };
            break;
          }
          case 'promote': {
            const ids = sorted(op.ids).filter((id) => !voters.includes(id));
            for (const id of ids) if (!cfg.learners.includes(id)) return refusal(400, 'not_a_learner', `node ${id} is not a learner; add it first`);
            if (ids.length === 0) return this.okView();
            if (!op.force) {
              const b = this.behind(ids);
              if (b) return b;
            }
            const next = sorted([...voters, ...ids]);
            if (this.quorumFails(voters, now)) return this.noQuorum(voters);
            if (this.quorumFails(next, now)) return this.noQuorum(next);
            target = { ...cfg, voters: next, learners: cfg.learners.filter((id) => !ids.includes(id)) };
            useJoint = true;
            break;
          }
          case 'voters': {
            const next = sorted(op.voters);
            if (next.length === 0) return refusal(409, 'last_voter', 'a cluster needs at least one voter');
            const members = allMembers(cfg);
            for (const id of next) if (!members.includes(id)) return refusal(400, 'not_a_member', `node ${id} is not a member; add it as a learner first`);
            if (sameSet(next, voters)) return this.okView();
            const promoted = next.filter((id) => !voters.includes(id));
            if (!op.force && promoted.length > 0) {
              const b = this.behind(promoted);
              if (b) return b;
            }
            if (this.quorumFails(voters, now)) return this.noQuorum(voters);
            if (this.quorumFails(next, now)) return this.noQuorum(next);
            const learners = cfg.learners.filter((id) => !next.includes(id));
            target = { ...cfg, voters: next, learners, nodes: this.pickNodes(cfg, [...next, ...learners]) };
            useJoint = true;
            break;
          }
          case 'remove': {
            if (voters.includes(op.id)) {
              if (voters.length === 1) return refusal(409, 'last_voter', `node ${op.id} is the last voter`);
              const rest = voters.filter((id) => id !== op.id);
              if (this.quorumFails(voters, now)) return this.noQuorum(voters);
              if (this.quorumFails(rest, now)) return this.noQuorum(rest);
              target = { ...cfg, voters: rest, nodes: this.pickNodes(cfg, [...rest, ...cfg.learners]) };
              useJoint = true;
            } else if (cfg.learners.includes(op.id)) {
              const learners = cfg.learners.filter((id) => id !== op.id);
              target = { ...cfg, learners, nodes: this.pickNodes(cfg, [...voters, ...learners]) };
            } else {
              return this.okView();
            }
            break;
          }
        }
      }

      // Pause the write planner until nothing this leader proposed is in flight.
      this.plannerPaused = true;
      while (this.lastProposedCmd > this.commitIndex) {
        if (mono() >= deadline || this.state !== 'leader') {
          this.resumePlanner();
          if (this.state !== 'leader') return retry503(this.leaderId);
          return refusal(409, 'busy', 'client writes stayed in flight until the deadline; retry');
        }
        await this.t.sleep(10);
      }
      if (this.state !== 'leader') {
        this.resumePlanner();
        return retry503(this.leaderId);
      }
      if (this.membership()!.index !== m.index) {
        this.resumePlanner();
        return refusal(409, 'membership_changed', 'the membership changed meanwhile; read it and retry');
      }

      const oldVoters = voters;
      const work = (async (): Promise<'ok' | 'leader_changed' | 'stopped'> => {
        if (useJoint) {
          const jointCfg: MembershipConfig = {
            ...target,
            joint: [oldVoters, sorted(target.voters)],
            nodes: { ...cfg.nodes, ...target.nodes },
          };
          const e1 = this.appendAsLeader({ kind: 'membership', membership: jointCfg });
          if (!e1) return 'stopped';
          if (!(await this.waitCommit(e1.index))) return 'leader_changed';
          if (this.state !== 'leader') return 'leader_changed';
        }
        const e2 = this.appendAsLeader({ kind: 'membership', membership: { ...target, joint: null } });
        if (!e2) return 'stopped';
        if (!(await this.waitCommit(e2.index))) return 'leader_changed';
        return 'ok';
      })();
      let timer: NodeJS.Timeout | null = null;
      const timedOut = new Promise<'timeout'>((r) => {
        timer = this.t.setTimeout(() => r('timeout'), Math.max(0, deadline - mono()));
      });
      const res = await Promise.race([work, timedOut]);
      if (timer) this.t.clear(timer);
      if (res === 'timeout') {
        // The change may still complete; the planner stays paused until it does (2 min at most).
        release = false;
        const cap = this.t.setTimeout(() => {
          this.changeLock = false;
          this.resumePlanner();
        }, 120_000);
        void work.finally(() => {
          this.t.clear(cap);
          this.changeLock = false;
          this.resumePlanner();
        });
        return {
          status: 504,
          body: {
            ok: false,
            code: 'timeout',
            error: 'the deadline passed before the change committed: it may still complete; read the membership before repeating the request',
          },
        };
      }
      this.resumePlanner();
      if (res === 'leader_changed') {
        if (this.state === 'leader') return refusal(409, 'leader_changed', 'leadership moved while the change was written; it may still commit: read the membership before repeating');
        return refusal(409, 'leader_changed', 'leadership moved while the change was written; it may still commit: read the membership before repeating');
      }
      if (res === 'stopped') return { status: 500, body: { ok: false, code: 'internal', error: 'raft stopped while writing the change' } };
      return this.okView();
    } finally {
      if (release) this.changeLock = false;
    }
  }

  private pickNodes(cfg: MembershipConfig, ids: number[]): Record<string, { raft: string; http: string }> {
    const out: Record<string, { raft: string; http: string }> = {};
    for (const id of ids) {
      const a = cfg.nodes[String(id)];
      if (a) out[String(id)] = a;
    }
    return out;
  }

  private okView(): Answer {
    return { status: 200, body: { engine: 'raft', ok: true, membership: this.leaderMembershipView() } };
  }

  // ---- SIGTERM hand-off (§3.5) -----------------------------------------------------------

  handoffTarget(forShutdown: boolean): number | null {
    const m = this.membership();
    if (!m) return null;
    const now = mono();
    let best: number | null = null;
    let bestMatched = -1;
    for (const id of allVoters(m.config)) {
      if (id === this.self) continue;
      const p = this.progress.get(id);
      if (!p) continue;
      if (forShutdown) {
        if (p.lastAckAt === null || now - p.lastAckAt > 1000) continue;
        const ho = this.handedOff.get(id);
        if (ho !== undefined && now - ho < 60_000) continue;
      }
      const matched = p.matched ?? -1;
      if (matched > bestMatched) {
        best = id;
        bestMatched = matched;
      }
    }
    return best;
  }

  private async sendTransfer(target: number, notice: boolean): Promise<boolean> {
    const addr = this.addrOf(target);
    if (!addr) return false;
    try {
      const r = await this.net.call(addr, '/raft/v1/transfer', { term: this.term, from: this.self, lastLogIndex: this.store.lastIndex(), handoff: notice }, 500);
      return r.status === 200 && (r.json as { ok?: boolean } | null)?.ok === true;
    } catch {
      return false;
    }
  }

  disableElections(): void {
    this.electionsDisabled = true;
    if (this.electionTimer) this.t.clear(this.electionTimer);
    this.electionTimer = null;
  }

  async handOff(waitMs: number): Promise<void> {
    if (this.state !== 'leader' || this.stopped) return;
    const m = this.membership();
    if (!m || allVoters(m.config).length < 2) return;
    this.handingOff = true;
    // Let what is in flight commit (at most half a second).
    const flushUntil = mono() + 500;
    while (this.state === 'leader' && this.commitIndex < this.store.lastIndex() && mono() < flushUntil) await this.t.sleep(10);
    if (this.state !== 'leader') return;
    const target = this.handoffTarget(true);
    if (target === null) {
      this.logger.info('no live voter to hand leadership to; the cluster elects after this node exits');
      this.handingOff = false;
      return;
    }
    this.logger.info('handing leadership off', { target });
    for (const id of allVoters(m.config)) {
      if (id === this.self) continue;
      const addr = this.addrOf(id);
      if (addr) this.net.call(addr, '/raft/v1/leaving', { nodeId: this.self }, 300).catch(() => {});
    }
    const until = mono() + waitMs;
    while (this.state === 'leader' && mono() < until) {
      void this.sendTransfer(target, true);
      await this.t.sleep(100);
    }
    if (this.state === 'leader') {
      this.logger.warn('leadership hand-off did not complete in time', { target });
      this.handingOff = false;
    } else {
      this.logger.info('leadership handed off', { newLeader: this.leaderId, term: this.term });
    }
  }

  // ---- formation ----------------------------------------------------------------------------

  // Founders' initialisation: identical on every founder (same entry, same cluster id).
  initializeCluster(voters: { id: number; raft: string; http: string }[], clusterId: string): void {
    const nodes: Record<string, { raft: string; http: string }> = {};
    for (const v of voters) nodes[String(v.id)] = { raft: v.raft, http: v.http };
    const config: MembershipConfig = {
      voters: sorted(voters.map((v) => v.id)),
      joint: null,
      learners: [],
      nodes,
      clusterId,
      // Every cluster begins at the baseline; its leader raises it once every member says what it reads.
      clusterVersion: BASELINE_KINDS,
    };
    const e: Entry = { index: 1, term: 0, ts: 0, kind: 'membership', membership: config };
    this.store.appendEntries([e]);
    this.memberships.push({ index: 1, term: 0, config });
    this.logger.info('initialized the cluster', { voters: config.voters, clusterId });
  }

  // QUEEN_RAFT_FORCE_RECOVER on the survivor: a new term, itself as the only voter, at the addresses
  // QUEEN_RAFT_PEERS gives this node when it is set (a volume restored under new names, or every
  // address changed), else at those the log registered (the broker's repair.rs: self_node first).
  forceRecover(): void {
    const m = this.membership()!;
    const peer = this.cfg.peers.find((p) => p.id === this.self);
    const addrs = peer
      ? { raft: peer.raft, http: peer.http }
      : (m.config.nodes[String(this.self)] ?? { raft: this.ownRaftAddr(), http: `${this.cfg.ip}:${this.cfg.httpPort}` });
    const config: MembershipConfig = {
      voters: [this.self],
      joint: null,
      learners: [],
      nodes: { [String(this.self)]: addrs },
      clusterId: createHash('sha256').update(randomUUID()).digest('hex').slice(0, 16),
      clusterVersion: m.config.clusterVersion,
    };
    this.store.meta.term += 1;
    this.store.meta.votedFor = this.self;
    this.store.meta.forceRecovered = true;
    this.store.saveMeta();
    const e: Entry = { index: this.store.lastIndex() + 1, term: this.term, ts: Date.now(), kind: 'membership', membership: config };
    this.store.appendEntries([e]);
    this.memberships.push({ index: e.index, term: e.term, config });
    this.logger.warn('force recover: this node is now the only voter of a new cluster', { term: this.term, index: e.index, clusterId: config.clusterId });
  }

  stateInfo(): Record<string, unknown> {
    const m = this.membership();
    return {
      nodeId: this.self,
      term: this.term,
      lastLogIndex: this.store.lastIndex(),
      voters: m ? allVoters(m.config) : [],
      initialized: this.store.hasState(),
      kinds: this.cfg.kinds,
    };
  }

  // Test-only: save the applied state now (graceful shutdown).
  flushState(): void {
    if (this.stopped && this.stopped.reason === 'snapshot') return;
    try {
      this.store.saveState(this.sm);
    } catch {
      // disk full: nothing more to do
    }
  }
}
