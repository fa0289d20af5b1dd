// Entry point of one simulated Queen node (one OS process per pod). Boot sequence of
// queen-broker-api.md §3.1, SIGTERM sequence of §3.5, exit codes 0 / 75 / 1.

import type * as http from 'node:http';
import { createHash, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { BootError, loadConfig, Logger, transferMs, type SimConfig } from './config.ts';
import { Net } from './net.ts';
import { DamagedError, Store } from './store.ts';
import { entryDigest } from './statemachine.ts';
import { RaftNode } from './raft.ts';
import { ClientApi, createRaftServer } from './api.ts';
import { allVoters } from './types.ts';

const logger = new Logger(null, true);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function fatal(msg: string, fields: Record<string, unknown> = {}): never {
  logger.fatal(msg, fields);
  process.exit(1);
}

function listen(server: http.Server, ip: string, port: number, what: string): Promise<void> {
  return new Promise((resolve) => {
    server.once('error', (e) => fatal(`cannot bind the ${what} port ${ip}:${port}: ${(e as Error).message}`));
    server.listen(port, ip, () => resolve());
  });
}

let cfg: SimConfig;
try {
  cfg = loadConfig(process.env);
} catch (e) {
  if (e instanceof BootError) fatal(`boot refused: ${e.message}`);
  throw e;
}
logger.nodeId = cfg.nodeId;
logger.json = cfg.logJson;

if (cfg.bootFail) fatal(`boot failed: image ${cfg.image} cannot start (simulated -bootfail image)`, { image: cfg.image });

logger.info('starting queen node simulator', {
  version: cfg.version,
  ip: cfg.ip,
  httpPort: cfg.httpPort,
  raftPort: cfg.raftPort,
  dataDir: cfg.dataDir,
  peers: cfg.peers.map((p) => p.id),
  join: cfg.join,
  pid: process.pid,
});

const store = new Store(cfg.dataDir, cfg.volumeBytes);
try {
  const { installedSnapshot } = store.open();
  if (installedSnapshot) logger.info('installed the staged snapshot', { index: installedSnapshot.index, term: installedSnapshot.term });
} catch (e) {
  if (e instanceof DamagedError) fatal(`boot refused: ${e.message}`);
  fatal(`boot refused: cannot open the data dir ${cfg.dataDir}: ${(e as Error).message}`);
}

if (store.state.clusterVersion > cfg.kinds) {
  fatal(`boot refused: this binary (${cfg.version}) reads catalogue version ${cfg.kinds} but the cluster is at ${store.state.clusterVersion}; run a newer image`);
}
for (const s of cfg.applySkip) {
  const e = store.entry(s.index);
  if (e && entryDigest(e) !== s.digest) {
    fatal(`boot refused: QUEEN_RAFT_APPLY_SKIP=${s.index}:${s.digest} does not match entry ${s.index} (digest ${entryDigest(e)})`, { index: s.index });
  }
}

const net = new Net(cfg.token, cfg.dnsServer);
net.localIp = cfg.ip;
if (cfg.netFile) {
  const file = cfg.netFile;
  net.onRulesChanged = (r) => logger.warn('the network changed (test bed)', { cutOff: r.cutOff === true, partition: r.partition ?? [], refuse: r.refuse ?? {} });
  net.loadRules(file);
  setInterval(() => net.loadRules(file), 200).unref();
}
net.onTokenRefused = (addr) => logger.error('a peer refused our raft RPC: wrong or missing x-queen-raft-token (QUEEN_RAFT_TOKEN differs)', { peer: addr });
const node = new RaftNode(cfg, logger, store, net);
let api: ClientApi | null = null;
let raftServer: http.Server | null = null;
let shuttingDown = false;
let exiting = false;

function exitNow(code: number): void {
  if (exiting) return;
  exiting = true;
  process.exit(code);
}
node.onFatalExit = exitNow;

if (cfg.forceRecover !== null) {
  if (cfg.forceRecover !== cfg.nodeId) {
    fatal(`boot refused: QUEEN_RAFT_FORCE_RECOVER=${cfg.forceRecover} names another node; this is node ${cfg.nodeId}. Set it only on the survivor, to its own id`);
  }
  const m = node.membership();
  if (!m) fatal('boot refused: QUEEN_RAFT_FORCE_RECOVER is set but this node holds no cluster state to recover');
  const voters = allVoters(m.config);
  if (voters.length === 1 && voters[0] === cfg.nodeId && m.config.joint === null) {
    logger.info('QUEEN_RAFT_FORCE_RECOVER: this node is already the only voter; nothing to do');
  } else if (store.meta.forceRecovered) {
    fatal('boot refused: members were added after a forced recovery; unset QUEEN_RAFT_FORCE_RECOVER');
  } else {
    node.forceRecover();
  }
}

async function shutdown(signal: string): Promise<void> {
  if (shuttingDown) return;
  shuttingDown = true;
  logger.info(`${signal} received; shutting down`);
  node.disableElections();
  if (node.stopped?.reason === 'snapshot') return; // exit 75 is on its way
  // Ephemeral queue hand-over: the simulator has no ephemeral queues, nothing to hand over.
  await node.handOff(3000);
  if (api) await api.drain(30_000 * cfg.timeFactor);
  if (node.state === 'leader') await node.handOff(3000);
  node.flushState();
  node.shutdownTimers();
  raftServer?.close();
  raftServer?.closeAllConnections();
  logger.info('shutdown complete');
  exitNow(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));

// Test-bed safety net: exit when the process that started us is gone (never in production).
const parentPid = Number(process.env.QUEEN_SIM_EXIT_WITH_PARENT ?? '');
if (Number.isInteger(parentPid) && parentPid > 1) {
  setInterval(() => {
    try {
      process.kill(parentPid, 0);
    } catch {
      logger.warn('the test process that started this node is gone; exiting');
      exitNow(137);
    }
  }, 1000).unref();
}
process.on('SIGINT', () => void shutdown('SIGINT'));

function clusterIdFor(peers: SimConfig['peers']): string {
  const key = [...peers].sort((a, b) => a.id - b.id).map((p) => `${p.id}=${p.raft}/${p.http}`).join(',');
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

// A fresh node without QUEEN_RAFT_JOIN asks every listed peer for its state: it founds the
// cluster only when every peer answers and none holds state, joins when any does, and keeps
// waiting while a peer is silent (older builds gave up after 1.5 s: QUEEN_SIM_LEGACY).
async function probePeers(): Promise<void> {
  const others = cfg.peers.filter((p) => p.id !== cfg.nodeId);
  const started = performance.now();
  let lastLog = 0;
  for (;;) {
    if (shuttingDown) return;
    const answers = await Promise.all(
      others.map((p) =>
        net
          .call(p.raft, '/raft/v1/state', {}, 400)
          .then((r) => (r.status === 200 ? (r.json as { initialized?: boolean }) : null))
          .catch(() => null),
      ),
    );
    if (answers.some((a) => a?.initialized === true)) {
      logger.info('this fresh node joins an existing cluster');
      return;
    }
    const silent = others.filter((_, i) => answers[i] === null).map((p) => p.id);
    if (silent.length === 0 || (cfg.legacy && performance.now() - started > 1500)) {
      node.initializeCluster(cfg.peers, clusterIdFor(cfg.peers));
      return;
    }
    if (performance.now() - lastLog > 5000) {
      lastLog = performance.now();
      logger.info('fresh node waits for every listed peer to answer before founding the cluster', { silent });
    }
    await sleep(150);
  }
}

async function boot(): Promise<void> {
  // The store replays before anything listens, in time proportional to its size (§3.1: the state
  // machine opens before the ports bind).
  const replay = transferMs(cfg, store.hasState() ? store.replayBytes() : 0, cfg.replayBytes);
  if (replay > 0) {
    logger.info('replaying the store', { bytes: store.replayBytes(), ms: Math.round(replay) });
    const until = performance.now() + replay;
    while (performance.now() < until && !shuttingDown) await sleep(Math.min(100, until - performance.now()));
    if (shuttingDown) return;
    logger.info('store replayed');
  }
  raftServer = createRaftServer(node, cfg, net, logger);
  await listen(raftServer, cfg.ip, cfg.raftPort, 'raft');

  if (node.initialized()) {
    node.start();
    if (cfg.peers.length > 0 || allVoters(node.membership()!.config).length > 1) {
      const until = performance.now() + 30_000 * cfg.timeFactor;
      while (node.leaderId === null && performance.now() < until && !shuttingDown && !node.stopped) await sleep(50);
      logger.info(node.leaderId !== null ? 'leader known' : 'no leader known yet; serving anyway', { leader: node.leaderId });
    }
  } else if (cfg.peers.length === 0) {
    node.initializeCluster([{ id: cfg.nodeId, raft: `${cfg.ip}:${cfg.raftPort}`, http: `${cfg.ip}:${cfg.httpPort}` }], createHash('sha256').update(randomUUID()).digest('hex').slice(0, 16));
    node.start();
  } else if (cfg.join) {
    logger.info('QUEEN_RAFT_JOIN=true: fresh node waits to be added as a learner');
    node.start();
  } else {
    await probePeers();
    node.start();
  }
  if (shuttingDown) return;

  api = new ClientApi(node, cfg, logger, { crash: (code) => setImmediate(() => exitNow(code)) });
  await listen(api.server, cfg.ip, cfg.httpPort, 'http');
  logger.info('serving', { http: `${cfg.ip}:${cfg.httpPort}`, raft: `${cfg.ip}:${cfg.raftPort}` });
  if (cfg.crashAfterMs !== null) {
    setTimeout(() => {
      logger.fatal(`simulated crash: image ${cfg.image} exits ${cfg.crashAfterMs! / 1000} s after it serves (-crashafter)`, { image: cfg.image });
      exitNow(1);
    }, cfg.crashAfterMs);
  }
}

boot().catch((e: unknown) => fatal(`boot failed: ${String(e)}`));
