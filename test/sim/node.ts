// One simulated Queen node as an object: the boot sequence of queen-broker-api.md §3.1, force
// recover (§3.6), the SIGTERM sequence of §3.5, the exit codes 0 / 75 / 1. It holds no state at
// module level, so one process can run one node (main.ts, one OS process per pod) or many (a
// fleet, fleet.ts). A node never ends its process: it reports how it ended on `exited`, and the
// process that runs it decides (main.ts exits with that code; a fleet only reports it).

import type * as http from 'node:http';
import { createHash, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { BootError, loadConfig, Logger, transferMs, type SimConfig } from './config.ts';
import { Net } from './net.ts';
import { DamagedError, Store } from './store.ts';
import { applyEntry, entryDigest } from './statemachine.ts';
import { RaftNode } from './raft.ts';
import { LinkNode, loadLinkSettings, takeSeed, type LinkSettings } from './link.ts';
import { ClientApi, createRaftServer } from './api.ts';
import { NodeScope } from './scope.ts';
import { allVoters } from './types.ts';

export type SimSignal = 'SIGTERM' | 'SIGINT' | 'SIGKILL';

export interface SimNodeIo {
  /** A pid-like id: what `/_sim/info` reports as `pid` (a process: its pid). */
  id: number;
  /** One log line, without its newline (a process: stdout). */
  log(line: string): void;
  /**
   * Whether the node runs beside others in one process (a fleet). Then an exception thrown by one
   * of its callbacks ends this node alone, with exit code 1 and the stack in its log, as an
   * uncaught exception ends a process; alone, it is rethrown and ends the process.
   */
  shared?: boolean;
}

export interface SimNodeExit {
  /** The exit code, or null when the node was killed (SIGKILL). */
  code: number | null;
  signal: 'SIGKILL' | null;
}

export interface SimNode {
  id: number;
  /** SIGTERM and SIGINT: the shutdown sequence. SIGKILL: the node ends at once, mid-flight. */
  signal(sig: SimSignal): void;
  exited: Promise<SimNodeExit>;
  /** An exception of this node that nothing caught: it ends as a process would (exit 1). */
  crash(err: unknown): void;
  /** Ends the node at once with `code`, after a warning line saying why (no shutdown sequence). */
  exit(code: number, why: string): void;
  /** The node ended (exited or killed). */
  readonly ended: boolean;
}

/** Thrown to unwind the boot sequence once the node has ended. */
class NodeEnded extends Error {}

function clusterIdFor(peers: SimConfig['peers']): string {
  const key = [...peers].sort((a, b) => a.id - b.id).map((p) => `${p.id}=${p.raft}/${p.http}`).join(',');
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

export function startSimNode(env: Record<string, string | undefined>, io: SimNodeIo): SimNode {
  const scope = new NodeScope();
  let resolveExit!: (e: SimNodeExit) => void;
  const exited = new Promise<SimNodeExit>((r) => (resolveExit = r));
  let ended = false;
  // A node that ended logs nothing more.
  const logger = new Logger(null, true, (line) => {
    if (!scope.dead) io.log(line);
  }, !!env.QUEEN_SIM_DEBUG);

  /** The node ends with `code` (null: killed): everything it holds is closed at once. */
  function end(code: number | null, signal: 'SIGKILL' | null): void {
    if (ended) return;
    ended = true;
    scope.kill();
    resolveExit({ code, signal });
  }
  const exitNow = (code: number): void => end(code, null);

  function crash(err: unknown): void {
    if (ended) return;
    // What Node.js prints on stderr for an uncaught exception, then exit code 1.
    const text = err instanceof Error ? (err.stack ?? String(err)) : `Uncaught ${String(err)}`;
    for (const line of text.split('\n')) io.log(line);
    exitNow(1);
  }
  if (io.shared) scope.onError = crash;

  function fatal(msg: string, fields: Record<string, unknown> = {}): never {
    logger.fatal(msg, fields);
    exitNow(1);
    throw new NodeEnded(msg);
  }

  const handle: SimNode = {
    id: io.id,
    exited,
    crash,
    exit(code: number, why: string): void {
      if (ended) return;
      logger.warn(why);
      exitNow(code);
    },
    get ended() {
      return ended;
    },
    signal(sig: SimSignal): void {
      if (ended) return;
      if (sig === 'SIGKILL') {
        end(null, 'SIGKILL');
        return;
      }
      onSignal?.(sig);
    },
  };
  let onSignal: ((sig: SimSignal) => void) | null = null;

  try {
    boot(env);
  } catch (e) {
    if (!(e instanceof NodeEnded)) {
      if (!io.shared) throw e;
      crash(e);
    }
  }
  return handle;

  // The boot sequence up to the ports (synchronous), then the rest on the event loop.
  function boot(env: Record<string, string | undefined>): void {
    let cfg: SimConfig;
    let linkSettings: LinkSettings;
    try {
      cfg = loadConfig(env);
      linkSettings = loadLinkSettings(env);
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
      pid: io.id,
    });

    const store = new Store(cfg.dataDir, cfg.volumeBytes, scope);
    try {
      const { installedSnapshot } = store.open();
      if (installedSnapshot) logger.info('installed the staged snapshot', { index: installedSnapshot.index, term: installedSnapshot.term });
    } catch (e) {
      if (e instanceof DamagedError) fatal(`boot refused: ${e.message}`);
      fatal(`boot refused: cannot open the data dir ${cfg.dataDir}: ${(e as Error).message}`);
    }

    // The cluster version this node's data is at: its saved state's, or a committed raise in its
    // log past it. A build that reads less refuses to start on it (the broker's D20 boot check:
    // "an older build is refused at boot"), before anything listens.
    const atVersion = Math.max(
      store.state.clusterVersion,
      ...store.log.filter((e) => e.kind === 'version' && e.index <= store.commit).map((e) => e.version ?? 0),
    );
    if (atVersion > cfg.kinds) {
      fatal(
        `boot refused: the cluster's data writes catalogue version ${atVersion}, and this binary (${cfg.version}) reads ${cfg.kinds}: ` +
          `it cannot start on it; run a build that reads ${atVersion} or later`,
        { clusterVersion: atVersion, kinds: cfg.kinds },
      );
    }
    for (const s of cfg.applySkip) {
      const e = store.entry(s.index);
      if (e && entryDigest(e) !== s.digest) {
        fatal(`boot refused: QUEEN_RAFT_APPLY_SKIP=${s.index}:${s.digest} does not match entry ${s.index} (digest ${entryDigest(e)})`, { index: s.index });
      }
    }

    const net = new Net(cfg.token, cfg.dnsServer, scope);
    net.localIp = cfg.ip;
    if (cfg.netFile) {
      const file = cfg.netFile;
      net.onRulesChanged = (r) => logger.warn('the network changed (test bed)', { cutOff: r.cutOff === true, partition: r.partition ?? [], refuse: r.refuse ?? {} });
      // Re-read when the test bed rewrites it (at once), and every 2 s whatever happens; every
      // 200 ms where the folder cannot be watched.
      scope.watchFile(file, () => net.loadRules(file), 2000, 200);
      net.loadRules(file);
    }
    net.onTokenRefused = (addr) => logger.error('a peer refused our raft RPC: wrong or missing x-queen-raft-token (QUEEN_RAFT_TOKEN differs)', { peer: addr });
    const node = new RaftNode(cfg, logger, store, net);
    let api: ClientApi | null = null;
    let raftServer: http.Server | null = null;
    let shuttingDown = false;
    node.onFatalExit = exitNow;
    // The cluster link (link.ts): a node with a source to follow, or a token to serve one.
    const link = linkSettings.sources.length > 0 || linkSettings.token !== null ? new LinkNode(node, linkSettings, net, logger, cfg.dataDir) : null;
    node.link = link;

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

    const listen = (server: http.Server, port: number, what: string): Promise<void> =>
      scope.listen(server, port, cfg.ip, (e) => {
        try {
          fatal(`cannot bind the ${what} port ${cfg.ip}:${port}: ${e.message}`);
        } catch {
          // ended
        }
      });

    async function shutdown(signal: string): Promise<void> {
      if (shuttingDown) return;
      shuttingDown = true;
      logger.info(`${signal} received; shutting down`);
      node.disableElections();
      if (node.stopped?.reason === 'snapshot') return; // exit 75 is on its way
      // Ephemeral queue hand-over: the simulator has no ephemeral queues, nothing to hand over.
      await node.handOff(3000);
      if (api) await api.drain(30_000 * cfg.timeFactor);
      if (scope.dead) return;
      if (node.state === 'leader') await node.handOff(3000);
      if (scope.dead) return;
      node.flushState();
      node.shutdownTimers();
      raftServer?.close();
      raftServer?.closeAllConnections();
      logger.info('shutdown complete');
      exitNow(0);
    }
    onSignal = (sig) => void shutdown(sig);

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
        await scope.sleep(150);
      }
    }

    // QUEEN_LINK_SEED on an empty node: the node it names takes the source's snapshot and starts
    // as the only voter of a new cluster (unless a peer already holds its cluster's state: it then
    // joins, a seed never being taken twice); the others wait to be added (test/sim/LINK.md).
    async function seedOrWait(l: LinkNode): Promise<void> {
      if (linkSettings.seed !== cfg.nodeId) {
        logger.info(`QUEEN_LINK_SEED names node ${linkSettings.seed}: this empty node waits to be added to its cluster`);
        return;
      }
      const others = cfg.peers.filter((p) => p.id !== cfg.nodeId);
      for (let round = 0; round < 3; round++) {
        const answers = await Promise.all(
          others.map((p) => net.call(p.raft, '/raft/v1/state', {}, 400).then((r) => (r.status === 200 ? (r.json as { initialized?: boolean }) : null)).catch(() => null)),
        );
        if (answers.some((a) => a?.initialized === true)) {
          logger.info('QUEEN_LINK_SEED: a peer already holds this cluster\'s state: this empty node joins it instead of seeding');
          return;
        }
        if (answers.every((a) => a !== null)) break;
        await scope.sleep(150);
      }
      let seeded: Awaited<ReturnType<typeof takeSeed>>;
      try {
        seeded = await takeSeed(linkSettings, net, cfg.dataDir, logger);
      } catch (e) {
        fatal((e as Error).message);
      }
      Object.assign(store.state, seeded.state);
      store.saveState(store.state);
      l.seed = seeded.record;
      const me = cfg.peers.find((p) => p.id === cfg.nodeId) ?? { id: cfg.nodeId, raft: `${cfg.ip}:${cfg.raftPort}`, http: `${cfg.ip}:${cfg.httpPort}` };
      // The seeded state is the cluster's first: applied with the founding entry, saved, and the log
      // purged up to it, so a node added later receives it as a snapshot (exit 75, then back on it).
      node.initializeCluster([me], createHash('sha256').update(randomUUID()).digest('hex').slice(0, 16));
      applyEntry(store.state, store.entry(1)!);
      store.saveState(store.state);
      store.saveCommit(1);
      node.commitIndex = 1;
      store.purgeTo(1);
      logger.info('link: seeded from the source\'s snapshot; this node is the only voter of its cluster', { source: seeded.record.source, index: seeded.record.position.index });
    }

    async function serve(): Promise<void> {
      // The store replays before anything listens, in time proportional to its size (§3.1: the
      // state machine opens before the ports bind).
      const replay = transferMs(cfg, store.hasState() ? store.replayBytes() : 0, cfg.replayBytes);
      if (replay > 0) {
        logger.info('replaying the store', { bytes: store.replayBytes(), ms: Math.round(replay) });
        const until = performance.now() + replay;
        while (performance.now() < until && !shuttingDown) await scope.sleep(Math.min(100, until - performance.now()));
        if (shuttingDown) return;
        logger.info('store replayed');
      }
      raftServer = createRaftServer(node, cfg, net, logger);
      await listen(raftServer, cfg.raftPort, 'raft');

      if (node.initialized()) {
        node.start();
        if (cfg.peers.length > 0 || allVoters(node.membership()!.config).length > 1) {
          const until = performance.now() + 30_000 * cfg.timeFactor;
          while (node.leaderId === null && performance.now() < until && !shuttingDown && !node.stopped) await scope.sleep(50);
          logger.info(node.leaderId !== null ? 'leader known' : 'no leader known yet; serving anyway', { leader: node.leaderId });
        }
      } else if (cfg.peers.length === 0) {
        node.initializeCluster([{ id: cfg.nodeId, raft: `${cfg.ip}:${cfg.raftPort}`, http: `${cfg.ip}:${cfg.httpPort}` }], createHash('sha256').update(randomUUID()).digest('hex').slice(0, 16));
        node.start();
      } else if (cfg.join) {
        logger.info('QUEEN_RAFT_JOIN=true: fresh node waits to be added as a learner');
        node.start();
      } else if (link && linkSettings.seed !== null) {
        await seedOrWait(link);
        if (shuttingDown || scope.dead) return;
        node.start();
      } else {
        await probePeers();
        node.start();
      }
      if (shuttingDown || scope.dead) return;

      link?.start();
      api = new ClientApi(node, cfg, logger, { crash: (code) => scope.setImmediate(() => exitNow(code)), pid: io.id });
      await listen(api.server, cfg.httpPort, 'http');
      logger.info('serving', { http: `${cfg.ip}:${cfg.httpPort}`, raft: `${cfg.ip}:${cfg.raftPort}` });
      if (cfg.crashAfterMs !== null) {
        scope.setTimeout(() => {
          logger.fatal(`simulated crash: image ${cfg.image} exits ${cfg.crashAfterMs! / 1000} s after it serves (-crashafter)`, { image: cfg.image });
          exitNow(1);
        }, cfg.crashAfterMs);
      }
    }

    serve().catch((e: unknown) => {
      if (e instanceof NodeEnded || scope.dead) return;
      try {
        fatal(`boot failed: ${String(e)}`);
      } catch {
        // ended
      }
    });
  }
}
