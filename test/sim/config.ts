// Environment of one simulated Queen node: the broker's documented knobs (queen-broker-api.md §0,
// §3, §4) plus the test bed's QUEEN_SIM_* variables. Parsing errors are boot refusals.

import { isIP } from 'node:net';

export interface PeerAddr {
  id: number;
  raft: string; // host:port as registered
  http: string;
}

export interface SimConfig {
  nodeId: number;
  peers: PeerAddr[]; // from QUEEN_RAFT_PEERS (empty = single voter, no network)
  ip: string; // loopback address to bind
  httpPort: number;
  raftPort: number;
  dataDir: string; // host path of QUEEN_RAFT_DIR
  dataDirContainer: string;
  volumeBytes: number | null;
  image: string;
  version: string;
  kinds: number;
  bootFail: boolean;
  /** A build whose node never reports itself ready (`-unready` in the image tag): /health stays 503. */
  neverReady: boolean;
  /**
   * A build that fails once its own format is in use (`-breaksonraise` in the image tag): it runs
   * and reports ready until the cluster version reaches what it reads, then /health stays 503.
   */
  breaksOnRaise: boolean;
  /** A build that crashes (exit 1, no shutdown sequence) this long after it serves (`-crashafter<seconds>`), or null. */
  crashAfterMs: number | null;
  timeFactor: number;
  dnsServer: string | null;
  heartbeatMs: number;
  electionMs: number; // minimum election timeout; the maximum is twice it
  readyLagMs: number;
  readyLagEntries: number;
  readyQuorumMs: number;
  /**
   * QUEEN_RAFT_CLUSTER_VERSION_MS: how often the leader compares the cluster version with what
   * every member reads and raises it (0: never). The broker's default, 1000, is scaled by the time
   * factor like the other timings of the simulator; a value set is taken as it is.
   */
  clusterVersionMs: number;
  promoteMaxLag: number;
  purgeHoldMs: number;
  logKeep: number;
  diskHighPct: number;
  diskLowPct: number;
  diskCheckMs: number;
  stmtTimeoutMs: number;
  join: boolean;
  token: string | null;
  applySkip: { index: number; digest: string }[];
  forceRecover: number | null;
  logJson: boolean;
  appendBatch: number;
  /** How long a commit may wait for the next append to carry it to a follower before it goes out on its own (ms). */
  commitNotifyMs: number;
  legacy: boolean;
  clientOffload: boolean;
  // Data that takes time (test-bed knobs; 0 = instantaneous, the old behaviour):
  /** Bytes each message of a command entry (a KV put, a pushed message) counts for: the store grows by it. */
  entryBytes: number;
  /** Replication bandwidth to each follower, bytes per second of simulated time (scaled by the time factor). */
  bandwidthBytes: number;
  /** Boot replay rate of the store, bytes per second of simulated time. */
  replayBytes: number;
  /** What a new leader knows of the followers' progress: carried over from the last members view, or unknown until they answer. */
  leaderProgress: 'carry' | 'unknown';
  /** JWT_ENABLED: the /api/v1/system/* routes need a token with the Admin role (HS256, JWT_SECRET). */
  jwtEnabled: boolean;
  jwtSecret: string | null;
  /** A file the test bed writes: network cut-off, partitions and NetworkPolicy refusals (re-read while running). */
  netFile: string | null;
  /** A file the test bed writes when the volume's file system grows while the node runs ({"bytes": N}). */
  volumeFile: string | null;
  /** QUEEN_TENANCY_HEADER, lower-cased ('' when unset). */
  tenancyHeader: string;
  /** QUEEN_SIM_DEBUG: debug lines are logged too. */
  debug: boolean;
}

export class BootError extends Error {}

function num(env: NodeJS.ProcessEnv, name: string, def: number, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return def;
  const v = Number(raw.trim());
  if (!Number.isFinite(v) || v < min) throw new BootError(`${name}=${raw} is not a number >= ${min}`);
  return v;
}

// A byte count: 1000, 64k, 10M, 1.5G, 2Gi, 64KiB ...
export function parseBytes(raw: string): number | null {
  const m = /^([0-9]+(?:\.[0-9]+)?)\s*(?:([kKMGT])(i?)B?|B)?$/.exec(raw.trim());
  if (!m) return null;
  const unit = m[2] ? { k: 1, K: 1, M: 2, G: 3, T: 4 }[m[2]]! : 0;
  return Math.round(Number(m[1]) * (m[3] ? 1024 : 1000) ** unit);
}

function bytes(env: NodeJS.ProcessEnv, name: string): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return 0;
  const v = parseBytes(raw);
  if (v === null) throw new BootError(`${name}=${raw} is not a byte count (such as 4096, 64k, 10M or 1Gi)`);
  return v;
}

export function isHostPort(s: string): boolean {
  const i = s.lastIndexOf(':');
  if (i <= 0) return false;
  const host = s.slice(0, i);
  const port = s.slice(i + 1);
  if (!/^[0-9]{1,5}$/.test(port)) return false;
  const p = Number(port);
  return host.length > 0 && p >= 0 && p <= 65535;
}

export function splitHostPort(s: string): { host: string; port: number } {
  const i = s.lastIndexOf(':');
  return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
}

export function parsePeers(raw: string | undefined): PeerAddr[] {
  if (raw === undefined || raw.trim() === '') return [];
  const out: PeerAddr[] = [];
  for (const part of raw.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new BootError(`QUEEN_RAFT_PEERS: '${part}' is not id=raft_host:port/http_host:port`);
    const idRaw = part.slice(0, eq);
    if (!/^[0-9]+$/.test(idRaw) || Number(idRaw) < 1) throw new BootError(`QUEEN_RAFT_PEERS: node id '${idRaw}' must be an integer >= 1`);
    const addrs = part.slice(eq + 1).split('/');
    if (addrs.length !== 2 || !isHostPort(addrs[0]!) || !isHostPort(addrs[1]!)) {
      throw new BootError(`QUEEN_RAFT_PEERS: '${part}' needs raft_host:port/http_host:port`);
    }
    const id = Number(idRaw);
    if (out.some((p) => p.id === id)) throw new BootError(`QUEEN_RAFT_PEERS: node id ${id} is listed twice`);
    out.push({ id, raft: addrs[0]!, http: addrs[1]! });
  }
  return out;
}

export function versionFromImage(image: string): string {
  let ref = image.trim();
  const at = ref.indexOf('@');
  if (at >= 0) ref = ref.slice(0, at);
  const slash = ref.lastIndexOf('/');
  const colon = ref.lastIndexOf(':');
  if (colon <= slash) return '2.6.0';
  let tag = ref.slice(colon + 1);
  if (tag === '' || tag === 'latest') return '2.6.0';
  if (tag.startsWith('v')) tag = tag.slice(1);
  return tag;
}

function versionTriple(v: string): [number, number, number] {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(v);
  if (!m) return [2, 6, 0];
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

/** The catalogue version every cluster starts at (the broker's baseline: a node that says nothing reads it). */
export const BASELINE_KINDS = 3;

/**
 * The effect-catalogue version a build reads (/health `raft.kinds`), from the broker's CHANGELOG:
 * 2.0.1 reads 4, 2.1.0 reads 5, 2.2.0 reads 6; before 2.0.1 the baseline, 3. The releases after
 * 2.2.0 up to 2.6.x read 6 as 2.2.0 does (no later CHANGELOG entry names a new version: inferred);
 * 2.7.0 and later read 7, a release of the test bed's own making that needs a newer format (an
 * upgrade to it is one-way once the leader raises the cluster version).
 */
export function kindsOf(version: string): number {
  const [a, b, c] = versionTriple(version);
  if (a > 2 || (a === 2 && b >= 7)) return 7;
  if (a === 2 && b >= 2) return 6;
  if (a === 2 && b === 1) return 5;
  if (a === 2 && (b > 0 || c >= 1)) return 4;
  return BASELINE_KINDS;
}

export function mapPath(containerPath: string, mountsJson: string | undefined): string {
  if (!mountsJson) return containerPath;
  let mounts: Record<string, string>;
  try {
    mounts = JSON.parse(mountsJson) as Record<string, string>;
  } catch {
    throw new BootError('QUEEN_SIM_MOUNTS is not a JSON object');
  }
  let best: string | null = null;
  for (const k of Object.keys(mounts)) {
    const norm = k.endsWith('/') && k.length > 1 ? k.slice(0, -1) : k;
    if (containerPath === norm || containerPath.startsWith(norm === '/' ? '/' : norm + '/')) {
      if (best === null || norm.length > best.length) best = norm;
    }
  }
  if (best === null) return containerPath;
  const key = Object.keys(mounts).find((k) => (k.endsWith('/') && k.length > 1 ? k.slice(0, -1) : k) === best)!;
  const rest = containerPath.slice(best.length).replace(/^\//, '');
  const host = mounts[key]!;
  return rest === '' ? host : host.replace(/\/$/, '') + '/' + rest;
}

export function loadConfig(env: NodeJS.ProcessEnv): SimConfig {
  const image = env.QUEEN_SIM_IMAGE ?? 'ghcr.io/queen-mq/queen:latest';
  const version = versionFromImage(image);
  const bootFail = image.includes('-bootfail');
  const neverReady = image.includes('-unready');
  const breaksOnRaise = image.includes('-breaksonraise');
  const crashAfter = /-crashafter([0-9]+)/.exec(image);

  // Node id: integer >= 1, or `ordinal` = trailing digits of HOSTNAME + 1.
  const rawId = (env.QUEEN_RAFT_NODE_ID ?? '1').trim();
  let nodeId: number;
  if (rawId === 'ordinal') {
    const host = env.HOSTNAME ?? '';
    const m = /([0-9]+)$/.exec(host);
    if (!m) throw new BootError(`QUEEN_RAFT_NODE_ID=ordinal but HOSTNAME '${host}' has no trailing digits`);
    nodeId = Number(m[1]) + 1;
  } else if (/^[0-9]+$/.test(rawId) && Number(rawId) >= 1) {
    nodeId = Number(rawId);
  } else {
    throw new BootError(`QUEEN_RAFT_NODE_ID='${rawId}' is not a node id (integer >= 1 or 'ordinal')`);
  }

  const peers = parsePeers(env.QUEEN_RAFT_PEERS);
  if (peers.length > 0 && !peers.some((p) => p.id === nodeId)) {
    throw new BootError(`QUEEN_RAFT_PEERS does not list this node's id ${nodeId}`);
  }

  const ip = env.QUEEN_SIM_IP && env.QUEEN_SIM_IP.trim() !== '' ? env.QUEEN_SIM_IP.trim() : '127.0.0.1';
  if (isIP(ip) !== 4 || !ip.startsWith('127.')) throw new BootError(`QUEEN_SIM_IP=${ip} is not a loopback IPv4 address`);

  const httpPort = num(env, 'PORT', 6632, 1);
  let raftPort = 7400;
  const own = peers.find((p) => p.id === nodeId);
  if (own) raftPort = splitHostPort(own.raft).port;
  if (env.QUEEN_RAFT_LISTEN && env.QUEEN_RAFT_LISTEN.trim() !== '') {
    const l = env.QUEEN_RAFT_LISTEN.trim();
    if (!isHostPort(l)) throw new BootError(`QUEEN_RAFT_LISTEN=${l} is not host:port`);
    raftPort = splitHostPort(l).port;
  }

  const dataDirContainer = env.QUEEN_RAFT_DIR && env.QUEEN_RAFT_DIR.trim() !== '' ? env.QUEEN_RAFT_DIR.trim() : '/var/lib/queen/raft';
  const dataDir = mapPath(dataDirContainer, env.QUEEN_SIM_MOUNTS);

  const volRaw = env.QUEEN_SIM_VOLUME_BYTES;
  const volumeBytes = volRaw && volRaw.trim() !== '' ? num(env, 'QUEEN_SIM_VOLUME_BYTES', 0, 1) : null;

  const single = peers.length === 0;
  const heartbeatMs = num(env, 'QUEEN_RAFT_HEARTBEAT_MS', single ? 50 : 100, 1);
  const electionMs = num(env, 'QUEEN_RAFT_ELECTION_MS', single ? 150 : 1000, 1);

  const applySkip: { index: number; digest: string }[] = [];
  const skipRaw = env.QUEEN_RAFT_APPLY_SKIP;
  if (skipRaw && skipRaw.trim() !== '') {
    for (const part of skipRaw.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
      const m = /^([0-9]+):([0-9a-fA-F]+)$/.exec(part);
      if (!m) throw new BootError(`QUEEN_RAFT_APPLY_SKIP: '${part}' is not <index>:<digest>`);
      applySkip.push({ index: Number(m[1]), digest: m[2]!.toLowerCase() });
    }
  }

  let forceRecover: number | null = null;
  const fr = env.QUEEN_RAFT_FORCE_RECOVER;
  if (fr && fr.trim() !== '') {
    if (!/^[0-9]+$/.test(fr.trim())) throw new BootError(`QUEEN_RAFT_FORCE_RECOVER=${fr} is not a node id`);
    forceRecover = Number(fr.trim());
  }

  const token = env.QUEEN_RAFT_TOKEN && env.QUEEN_RAFT_TOKEN !== '' ? env.QUEEN_RAFT_TOKEN : null;
  const truthy = (v: string | undefined) => v !== undefined && ['1', 'true', 'yes', 'on'].includes(v.trim().toLowerCase());

  const progressRaw = (env.QUEEN_SIM_LEADER_PROGRESS ?? 'carry').trim().toLowerCase();
  if (progressRaw !== 'carry' && progressRaw !== 'unknown') throw new BootError(`QUEEN_SIM_LEADER_PROGRESS=${progressRaw} is not carry or unknown`);
  const jwtEnabled = truthy(env.JWT_ENABLED);
  const jwtSecret = env.JWT_SECRET && env.JWT_SECRET !== '' ? env.JWT_SECRET : null;
  if (jwtEnabled && jwtSecret === null) throw new BootError('JWT_ENABLED=true needs JWT_SECRET (the key the tokens are signed with, HS256)');
  const file = (v: string | undefined) => (v && v.trim() !== '' ? v.trim() : null);

  return {
    nodeId,
    peers,
    ip,
    httpPort,
    raftPort,
    dataDir,
    dataDirContainer,
    volumeBytes,
    image,
    version,
    kinds: kindsOf(version),
    bootFail,
    neverReady,
    breaksOnRaise,
    crashAfterMs: crashAfter ? Number(crashAfter[1]) * 1000 : null,
    timeFactor: num(env, 'QUEEN_SIM_TIME_FACTOR', 1, 0),
    dnsServer: env.QUEEN_SIM_DNS && env.QUEEN_SIM_DNS.trim() !== '' ? env.QUEEN_SIM_DNS.trim() : null,
    heartbeatMs,
    electionMs,
    readyLagMs: num(env, 'QUEEN_RAFT_READY_LAG_MS', 2000),
    readyLagEntries: num(env, 'QUEEN_RAFT_READY_LAG_ENTRIES', 1000),
    readyQuorumMs: num(env, 'QUEEN_RAFT_READY_QUORUM_MS', 5000),
    clusterVersionMs: num(env, 'QUEEN_RAFT_CLUSTER_VERSION_MS', 1000 * num(env, 'QUEEN_SIM_TIME_FACTOR', 1, 0)),
    promoteMaxLag: num(env, 'QUEEN_RAFT_PROMOTE_MAX_LAG', 1000),
    purgeHoldMs: num(env, 'QUEEN_RAFT_PURGE_HOLD_S', 600) * 1000,
    logKeep: num(env, 'QUEEN_RAFT_LOG_KEEP', 4096),
    diskHighPct: num(env, 'QUEEN_RAFT_DISK_HIGH_PCT', 85),
    diskLowPct: num(env, 'QUEEN_RAFT_DISK_LOW_PCT', 80),
    diskCheckMs: num(env, 'QUEEN_RAFT_DISK_CHECK_MS', 100, 1),
    stmtTimeoutMs: num(env, 'QUEEN_STMT_TIMEOUT_MS', 30000, 1),
    join: truthy(env.QUEEN_RAFT_JOIN),
    token,
    applySkip,
    forceRecover,
    logJson: env.QUEEN_LOG_JSON === undefined || !['0', 'false', 'no', 'off'].includes(env.QUEEN_LOG_JSON.trim().toLowerCase()),
    appendBatch: num(env, 'QUEEN_SIM_APPEND_BATCH', 64, 1),
    commitNotifyMs: num(env, 'QUEEN_SIM_COMMIT_NOTIFY_MS', 10),
    legacy: truthy(env.QUEEN_SIM_LEGACY),
    clientOffload: !['off', '0', 'false'].includes((env.QUEEN_RAFT_CLIENT_OFFLOAD ?? 'on').trim().toLowerCase()),
    entryBytes: bytes(env, 'QUEEN_SIM_ENTRY_BYTES'),
    bandwidthBytes: bytes(env, 'QUEEN_SIM_BANDWIDTH'),
    replayBytes: bytes(env, 'QUEEN_SIM_REPLAY_RATE'),
    leaderProgress: progressRaw,
    jwtEnabled,
    jwtSecret,
    netFile: file(env.QUEEN_SIM_NET_FILE),
    volumeFile: file(env.QUEEN_SIM_VOLUME_FILE),
    tenancyHeader: (env.QUEEN_TENANCY_HEADER ?? '').trim().toLowerCase(),
    debug: !!env.QUEEN_SIM_DEBUG,
  };
}

// Derived timings (§4).
export function liveWithinMs(c: SimConfig): number {
  return Math.max(1000, 2 * c.electionMs);
}

/**
 * Milliseconds of real time that moving `bytes` at `perSecond` (bytes per second of simulated
 * time) takes: the test bed's time factor scales it as it scales every other timing. 0 when the
 * rate is 0 (unlimited).
 */
export function transferMs(c: Pick<SimConfig, 'timeFactor'>, bytes: number, perSecond: number): number {
  if (perSecond <= 0 || bytes <= 0) return 0;
  return (bytes / perSecond) * 1000 * c.timeFactor;
}

export type Level = 'debug' | 'info' | 'warn' | 'error' | 'fatal';

/** Where a node's log lines go: a process's stdout, or the log file a fleet writes for it. */
export type LogSink = (line: string) => void;

export class Logger {
  nodeId: number | null;
  json: boolean;
  debugOn: boolean;
  sink: LogSink;
  constructor(nodeId: number | null, json: boolean, sink: LogSink, debugOn = false) {
    this.nodeId = nodeId;
    this.json = json;
    this.sink = sink;
    this.debugOn = debugOn;
  }
  log(level: Level, msg: string, fields: Record<string, unknown> = {}): void {
    if (this.json) {
      const line = { ts: new Date().toISOString(), level: level.toUpperCase(), msg, nodeId: this.nodeId, ...fields };
      this.sink(JSON.stringify(line));
    } else {
      const kv = Object.entries(fields).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ');
      this.sink(`${new Date().toISOString()} ${level.toUpperCase()} node=${this.nodeId} ${msg}${kv ? ' ' + kv : ''}`);
    }
  }
  info(msg: string, f?: Record<string, unknown>): void { this.log('info', msg, f); }
  warn(msg: string, f?: Record<string, unknown>): void { this.log('warn', msg, f); }
  error(msg: string, f?: Record<string, unknown>): void { this.log('error', msg, f); }
  fatal(msg: string, f?: Record<string, unknown>): void { this.log('fatal', msg, f); }
  debug(msg: string, f?: Record<string, unknown>): void {
    if (this.debugOn) this.log('debug', msg, f);
  }
}
