// The cluster link of a simulated node (test/sim/LINK.md): a SOURCE serves its committed log on
// its Raft port to a standby that presents the link token; a STANDBY cluster's leader reads it and
// replays each source entry into its own log; a standby refuses its clients' writes until it is
// promoted. One LinkNode per node; raft.ts, api.ts and node.ts call it through small hooks.

import { randomBytes } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type * as http from 'node:http';
import { performance } from 'node:perf_hooks';
import { BootError, type Logger } from './config.ts';
import { readBody, sendJson, type Net } from './net.ts';
import type { Answer, RaftNode } from './raft.ts';
import type { Command, Entry, LinkPosition, LinkState } from './types.ts';
import type { SmState } from './statemachine.ts';

const mono = (): number => performance.now();

/** The header that carries the link token (the source's QUEEN_LINK_TOKEN). */
export const LINK_TOKEN_HEADER = 'x-queen-link-token';
export const READ_PATH = '/link/v1/read';
export const SNAPSHOT_PATH = '/link/v1/snapshot';
/** The seed's record beside the data. */
export const SEED_FILE = 'link.seed';
const HOLDS_FILE = 'link-holds.json';

/** How long a read with nothing to send is held by the source; how long a hold-only ping waits. */
const WAIT_MS = 2000;
const WAIT_MS_MAX = 30_000;
/** Source entries in one answer at most. */
const MAX_ENTRIES = 256;
/** How often the source nodes that are not read are told the standby's position. */
const HOLD_EVERY_MS = 5000;
/** How often an idle follower looks at its node's role, and a halted one asks again. */
const IDLE_MS = 200;
const HALT_MS = 10_000;
const BACKOFF_MAX_MS = 5000;

export const STANDBY_REFUSAL = 'this cluster is a standby: it replays its source and takes no writes until it is promoted';

export interface LinkSettings {
  /** QUEEN_LINK_SOURCE: the source nodes' Raft RPC addresses. */
  sources: string[];
  /** QUEEN_LINK_SOURCE_TOKEN: what this standby presents. */
  sourceToken: string | null;
  /** QUEEN_LINK_TOKEN: what a standby must present to read this cluster (null: this node serves no link). */
  token: string | null;
  /** QUEEN_LINK_STANDBY: an empty cluster becomes a standby at its first leadership. */
  standby: boolean;
  /** QUEEN_LINK_SEED: the node that takes its first state from the source's snapshot. */
  seed: number | null;
  /** QUEEN_LINK_NAME. */
  name: string | null;
  /** QUEEN_LINK_HOLD_S, in ms. */
  holdMs: number;
}

const truthy = (v: string | undefined) => ['1', 'true', 'on', 'yes'].includes((v ?? '').trim().toLowerCase());

/** `host:port[,host:port...]`, each with or without http:// (the Raft port speaks plain HTTP). */
export function parseSources(raw: string): string[] {
  const out: string[] = [];
  for (const part of raw.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    if (part.startsWith('https://')) throw new BootError(`QUEEN_LINK_SOURCE: \`${part}\`: the Raft RPC port speaks plain HTTP`);
    const addr = part.replace(/^http:\/\//, '').replace(/\/+$/, '');
    const colon = addr.lastIndexOf(':');
    const port = Number(addr.slice(colon + 1));
    if (colon <= 0 || !/^[0-9]+$/.test(addr.slice(colon + 1)) || port > 65535) {
      throw new BootError(`QUEEN_LINK_SOURCE: \`${part}\` is not \`host:port\` (a source node's Raft RPC address)`);
    }
    out.push(addr);
  }
  return out;
}

/** The link's env, checked as the broker checks it at boot. */
export function loadLinkSettings(env: Record<string, string | undefined>): LinkSettings {
  const sources = parseSources(env.QUEEN_LINK_SOURCE ?? '');
  const trimmed = (v: string | undefined) => (v && v.trim() !== '' ? v.trim() : null);
  const standby = truthy(env.QUEEN_LINK_STANDBY);
  if (standby && sources.length === 0) throw new BootError('QUEEN_LINK_STANDBY needs QUEEN_LINK_SOURCE: a standby replays a source');
  let seed: number | null = null;
  const rawSeed = trimmed(env.QUEEN_LINK_SEED);
  if (rawSeed !== null) {
    if (!/^[0-9]+$/.test(rawSeed) || Number(rawSeed) < 1) throw new BootError(`QUEEN_LINK_SEED=${rawSeed}: expected the id of the one node that takes the seed`);
    seed = Number(rawSeed);
    if (sources.length === 0) throw new BootError("QUEEN_LINK_SEED needs QUEEN_LINK_SOURCE: a seed is the source's snapshot");
  }
  const hold = Number(trimmed(env.QUEEN_LINK_HOLD_S) ?? '3600');
  return {
    sources,
    sourceToken: trimmed(env.QUEEN_LINK_SOURCE_TOKEN),
    token: trimmed(env.QUEEN_LINK_TOKEN),
    standby,
    seed,
    name: trimmed(env.QUEEN_LINK_NAME),
    holdMs: (Number.isFinite(hold) && hold > 0 ? hold : 3600) * 1000,
  };
}

/** What the seed left beside the data: the source node it came from and the position it stands at. */
export interface SeedRecord {
  source: string;
  atMs: number;
  id: string;
  position: LinkPosition;
}

export function readSeedRecord(dir: string): SeedRecord | null {
  try {
    return JSON.parse(readFileSync(join(dir, SEED_FILE), 'utf8')) as SeedRecord;
  } catch {
    return null;
  }
}

function writeJsonAtomic(dir: string, name: string, value: unknown): void {
  const tmp = join(dir, `${name}.tmp`);
  writeFileSync(tmp, JSON.stringify(value));
  renameSync(tmp, join(dir, name));
}

/** An 8-hex-digit standby id, drawn once (with the standby entry, or with the seed). */
const drawId = () => randomBytes(4).toString('hex');

/** What the source's snapshot carries: the applied state and where the source's log stood. */
interface SeedAnswer {
  position: LinkPosition;
  state: Pick<SmState, 'kv' | 'kvVersion' | 'queues' | 'pad' | 'clusterVersion'>;
}

/** Why a call to a source node failed, in the words the broker's follower uses. */
function callError(url: string, status: number | null, body: unknown, cause?: unknown): string {
  if (status === 401) return `${url}: the source refused this standby's QUEEN_LINK_SOURCE_TOKEN`;
  if (status === 404) return `${url}: the source serves no link (QUEEN_LINK_TOKEN is not set on it, or it runs a release without one)`;
  if (status !== null) return `${url}: ${status}: ${JSON.stringify(body ?? null).slice(0, 256)}`;
  const msg = cause instanceof Error ? cause.message : String(cause);
  return `${url}: ${msg}`;
}

/**
 * Takes a seed for a node whose data directory is empty: a source node's snapshot (each configured
 * node in turn), staged as this node's state. Returns the record, or throws with why no source
 * node gave one (the node must not boot as a cluster of its own with nothing in it).
 */
export async function takeSeed(settings: LinkSettings, net: Net, dir: string, logger: Logger): Promise<{ record: SeedRecord; state: SeedAnswer['state'] }> {
  const id = drawId();
  const reader = settings.name ?? `standby-${id}`;
  let last = 'no source node is configured';
  for (const addr of settings.sources) {
    const url = `http://${addr}${SNAPSHOT_PATH}`;
    logger.warn('link: seeding this node from its source\'s snapshot', { source: addr });
    try {
      const r = await net.call(addr, SNAPSHOT_PATH, { reader }, 60_000, settings.sourceToken ? { [LINK_TOKEN_HEADER]: settings.sourceToken } : {});
      if (r.status !== 200) {
        last = callError(url, r.status, r.json);
        logger.warn('link: the seed was not read', { error: last });
        continue;
      }
      const a = r.json as SeedAnswer;
      const record: SeedRecord = { source: addr, atMs: Date.now(), id, position: a.position };
      writeJsonAtomic(dir, SEED_FILE, record);
      return { record, state: a.state };
    } catch (e) {
      last = callError(url, null, null, e);
      logger.warn('link: the seed was not read', { error: last });
    }
  }
  throw new Error(`this node could not be seeded from its source: ${last}`);
}

type FollowerState = 'idle' | 'following' | 'waiting' | 'halted';

interface FollowerStatus {
  state: FollowerState;
  source: string;
  scanned: number;
  sourceApplied: number;
  error: string | null;
  entries: number;
  lastAnswerAt: number;
}

interface Hold {
  after: number;
  at: number;
  seenMs: number;
}

/** The read answer (JSON here; the broker's is binary: LINK.md section 8). */
type ReadAnswer =
  | { status: 'entries'; entries: { index: number; term: number; ts: number; cmd: Command; pad?: number }[]; upto: number; applied: number; purged: number }
  | { status: 'purged'; purged: number; applied: number }
  | { status: 'mismatch'; index: number; sourceTerm: number | null; applied: number; purged: number };

export class LinkNode {
  readonly settings: LinkSettings;
  private readonly node: RaftNode;
  private readonly net: Net;
  private readonly logger: Logger;
  private readonly dir: string;
  /** The seed this node took (link.seed), if any: where its cluster becomes a standby. */
  seed: SeedRecord | null;
  private readonly follower: FollowerStatus;
  private readonly holds = new Map<string, Hold>();
  private holdsSavedAt = 0;
  private running = false;
  private notedPrimary = false;

  constructor(node: RaftNode, settings: LinkSettings, net: Net, logger: Logger, dir: string) {
    this.node = node;
    this.settings = settings;
    this.net = net;
    this.logger = logger;
    this.dir = dir;
    this.seed = readSeedRecord(dir);
    this.follower = { state: 'idle', source: settings.sources[0] ?? '', scanned: 0, sourceApplied: 0, error: null, entries: 0, lastAnswerAt: 0 };
    this.loadHolds();
  }

  private get sm(): SmState {
    return this.node.sm;
  }

  /** The cluster's applied role row. */
  private get state(): LinkState | undefined {
    return this.sm.link;
  }

  /**
   * Where this cluster would become a standby at its first leadership (the boot directive), or
   * null: a seed not yet attached, or an empty cluster started with QUEEN_LINK_STANDBY.
   */
  private attachPending(): { position: LinkPosition; id: string } | null {
    if (this.state || this.settings.sources.length === 0) return null;
    if (this.seed) return { position: this.seed.position, id: this.seed.id };
    const empty = this.sm.kvVersion === 0 && Object.keys(this.sm.queues).length === 0;
    if (this.settings.standby && empty) return { position: { index: 0, term: 0, ts: 0 }, id: '' };
    return null;
  }

  /** primary, standby (a role row, or one on its way), promoted. */
  role(): 'primary' | 'standby' | 'promoted' {
    if (this.state) return this.state.role;
    return this.attachPending() ? 'standby' : 'primary';
  }

  /** A client's write on a standby: refused, retryable (the link's own entries pass). */
  refuseWrite(cmd: Command): Answer | null {
    if (cmd.t === 'link' || this.role() !== 'standby') return null;
    return { status: 503, body: { error: STANDBY_REFUSAL, code: 'standby' }, headers: { 'retry-after': '1' } };
  }

  // ---- the follower (the standby's leader) -----------------------------------------------

  start(): void {
    if (this.running || this.settings.sources.length === 0) return;
    this.running = true;
    void this.node.t.guard(this.run()).catch((e: unknown) => this.logger.error('link: the follower failed', { error: String(e) }));
  }

  private setState(state: FollowerState, error: string | null): void {
    const f = this.follower;
    if (f.state !== state || f.error !== error) {
      if (error && state === 'halted') this.logger.error('link: the standby stopped following its source', { why: error });
      else if (error) this.logger.warn('link: the standby waits', { why: error });
      else if (state === 'following') this.logger.info('link: following the source', { source: f.source, index: this.state?.position.index ?? 0 });
    }
    f.state = state;
    f.error = error;
  }

  private myTurn(): boolean {
    return this.node.isLeaderReady() && !this.node.handingOff;
  }

  /** The reader name the source knows this standby by. */
  private readerName(id: string): string {
    return this.settings.name ?? (id === '' ? 'standby' : `standby-${id}`);
  }

  private async run(): Promise<void> {
    const t = this.node.t;
    let backoff = 100;
    let source = 0;
    let heldAt = 0;
    for (;;) {
      if (t.dead) return;
      if (!this.myTurn()) {
        this.setState('idle', null);
        await t.sleep(IDLE_MS);
        continue;
      }
      const pending = this.attachPending();
      if (pending) {
        const id = pending.id === '' ? drawId() : pending.id;
        const ok = await this.propose({ t: 'link', op: 'attach', id, source: this.settings.sources.join(','), position: pending.position, at: Date.now() });
        if (ok) this.logger.info('link: this cluster becomes a standby', { source: this.settings.sources.join(','), index: pending.position.index, id });
        else await t.sleep(IDLE_MS);
        continue;
      }
      const link = this.state;
      if (!link || link.role !== 'standby') {
        if (!link && this.settings.standby && !this.notedPrimary) {
          this.notedPrimary = true;
          this.logger.error('link: this cluster is configured as a standby but holds entries of its own, so it stays an ordinary cluster: a standby starts empty or from a seed of its source');
        }
        this.setState('idle', null);
        await t.sleep(IDLE_MS);
        continue;
      }
      const reader = this.readerName(link.id);
      const addr = this.settings.sources[source % this.settings.sources.length]!;
      this.follower.source = addr;
      if (mono() - heldAt >= HOLD_EVERY_MS) {
        heldAt = mono();
        for (const other of this.settings.sources.filter((s) => s !== addr)) {
          void this.read(other, { after: link.position.index, afterTerm: link.position.term, waitMs: 0, reader, holdOnly: true }).catch(() => undefined);
        }
      }
      const position = link.position;
      const url = `http://${addr}${READ_PATH}`;
      let answer: ReadAnswer;
      try {
        const r = await this.read(addr, { after: position.index, afterTerm: position.term, waitMs: WAIT_MS, reader });
        if (r.status !== 200) throw Object.assign(new Error(callError(url, r.status, r.json)), { said: true });
        answer = r.json as ReadAnswer;
      } catch (e) {
        source++;
        this.setState('waiting', (e as { said?: boolean }).said ? (e as Error).message : callError(url, null, null, e));
        await t.sleep(backoff);
        backoff = Math.min(BACKOFF_MAX_MS, backoff * 2);
        continue;
      }
      this.follower.lastAnswerAt = Date.now();
      this.follower.sourceApplied = answer.applied;
      if (answer.status === 'purged') {
        source++;
        this.setState('halted', `the source node ${addr} purged its log up to ${answer.purged} and this standby is at ${position.index}: it needs a new seed`);
        await t.sleep(HALT_MS);
        continue;
      }
      if (answer.status === 'mismatch') {
        this.setState('halted', `the source's entry ${answer.index} has term ${answer.sourceTerm ?? 'unknown'} and this standby replayed term ${position.term}: it followed another log and needs a new seed`);
        await t.sleep(HALT_MS);
        continue;
      }
      if (answer.applied < position.index) {
        // This source node is behind the standby: another one may not be.
        source++;
        this.setState('waiting', `the source has applied ${answer.applied} and this standby is at ${position.index}: no node of the source is as far as the standby`);
        await t.sleep(backoff);
        backoff = Math.min(BACKOFF_MAX_MS, backoff * 2);
        continue;
      }
      backoff = 100;
      this.setState('following', null);
      if (!(await this.replay(position, answer.entries))) continue;
      this.follower.scanned = Math.max(this.follower.scanned, answer.upto, this.state?.position.index ?? 0);
    }
  }

  private read(addr: string, body: Record<string, unknown>) {
    const wait = typeof body.waitMs === 'number' ? body.waitMs : 0;
    return this.net.call(addr, READ_PATH, body, wait + 5000, this.settings.sourceToken ? { [LINK_TOKEN_HEADER]: this.settings.sourceToken } : {});
  }

  /** Proposes one link entry as the leader and waits for it to apply here. */
  private async propose(cmd: Command): Promise<boolean> {
    const deadline = mono() + this.node.cfg.stmtTimeoutMs;
    const r = await this.node.proposeLocal(cmd, deadline);
    if (!r.ok) return false;
    const w = await this.node.waitApplied(r.index, r.term, deadline);
    return w.ok;
  }

  /** Replays one answer's entries in order; false when it stopped early (not this node's turn any more). */
  private async replay(from: LinkPosition, entries: Extract<ReadAnswer, { status: 'entries' }>['entries']): Promise<boolean> {
    let prev = from.index;
    let last: { index: number; term: number } | null = null;
    const deadline = mono() + this.node.cfg.stmtTimeoutMs;
    for (const e of entries) {
      const position = { index: e.index, term: e.term, ts: e.ts };
      const r = await this.node.proposeLocal({ t: 'link', op: 'mirror', prev, position, cmd: e.cmd, ...(e.pad ? { pad: e.pad } : {}) }, deadline);
      if (!r.ok) return false;
      last = r;
      prev = e.index;
    }
    if (!last) return true;
    const w = await this.node.waitApplied(last.index, last.term, deadline);
    if (w.ok) this.follower.entries += entries.length;
    return w.ok;
  }

  // ---- promotion -----------------------------------------------------------------------

  async promote(): Promise<Answer> {
    const role = this.role();
    if (role === 'primary') return { status: 409, body: { code: 'not_standby', error: 'this cluster is not a standby' } };
    if (role === 'promoted') return { status: 200, body: this.status() };
    if (!this.state) return { status: 503, body: { error: "this cluster's link role is not read yet; retry", code: 'retry' }, headers: { 'retry-after': '1' } };
    const a = await this.node.execute({ t: 'link', op: 'promote', at: Date.now() });
    if (a.status !== 200) return a;
    this.logger.warn('link: this cluster was promoted by request', { position: this.state?.position.index });
    return { status: 200, body: this.status() };
  }

  // ---- the source side -------------------------------------------------------------------

  /** A standby's call on this node's Raft port (`/link/v1/...`). */
  serveRaftPort(route: string, req: http.IncomingMessage, res: http.ServerResponse): void {
    if (this.settings.token === null) {
      sendJson(res, 404, { error: 'this node serves no link: QUEEN_LINK_TOKEN is not set' });
      return;
    }
    if (req.headers[LINK_TOKEN_HEADER] !== this.settings.token) {
      sendJson(res, 401, { error: `missing or wrong ${LINK_TOKEN_HEADER}` });
      return;
    }
    this.node.t
      .guard(readBody(req))
      .then(async (text) => {
        const body = (text === '' ? {} : JSON.parse(text)) as Record<string, unknown>;
        if (route === READ_PATH) sendJson(res, 200, await this.serveRead(body));
        else if (route === SNAPSHOT_PATH) sendJson(res, 200, this.serveSnapshot(body));
        else sendJson(res, 404, { error: `no link route ${route}` });
      })
      .catch((e: unknown) => sendJson(res, 400, { error: String(e) }));
  }

  private async serveRead(b: Record<string, unknown>): Promise<ReadAnswer> {
    const after = typeof b.after === 'number' ? b.after : 0;
    const afterTerm = typeof b.afterTerm === 'number' ? b.afterTerm : 0;
    const reader = typeof b.reader === 'string' && b.reader !== '' ? b.reader : 'standby';
    const store = this.node.store;
    this.hold(reader, after);
    if (b.holdOnly === true) return { status: 'entries', entries: [], upto: after, applied: this.sm.applied, purged: store.purgedIndex };
    const wait = Math.min(WAIT_MS_MAX, typeof b.waitMs === 'number' ? b.waitMs : 0);
    const until = mono() + wait;
    while (this.sm.applied <= after && mono() < until && !this.node.t.dead) await this.node.t.sleep(10);
    const applied = this.sm.applied;
    const purged = store.purgedIndex;
    if (after < purged) {
      this.holds.delete(reader);
      return { status: 'purged', purged, applied };
    }
    if (after > applied) return { status: 'entries', entries: [], upto: applied, applied, purged };
    if (after > 0) {
      const term = store.termAt(after);
      if (term !== afterTerm) return { status: 'mismatch', index: after, sourceTerm: term ?? null, applied, purged };
    }
    const entries: Extract<ReadAnswer, { status: 'entries' }>['entries'] = [];
    let upto = after;
    for (let i = after + 1; i <= applied && entries.length < MAX_ENTRIES; i++) {
      const e = store.entry(i);
      if (!e) return { status: 'purged', purged: store.purgedIndex, applied };
      upto = i;
      const cmd = servedCommand(e);
      if (cmd) entries.push({ index: e.index, term: e.term, ts: e.ts, cmd, ...(e.pad ? { pad: e.pad } : {}) });
    }
    return { status: 'entries', entries, upto, applied, purged };
  }

  private serveSnapshot(b: Record<string, unknown>): SeedAnswer {
    const s = this.sm;
    const reader = typeof b.reader === 'string' ? b.reader : '';
    if (reader !== '') this.hold(reader, s.applied);
    return {
      position: { index: s.applied, term: s.appliedTerm, ts: s.appliedTs },
      state: structuredClone({ kv: s.kv, kvVersion: s.kvVersion, queues: s.queues, pad: s.pad ?? 0, clusterVersion: s.clusterVersion }),
    };
  }

  private hold(reader: string, after: number): void {
    const fresh = !this.holds.has(reader) || after < this.holds.get(reader)!.after;
    this.holds.set(reader, { after, at: mono(), seenMs: Date.now() });
    if (fresh || Date.now() - this.holdsSavedAt > 10_000) this.saveHolds();
  }

  /** The highest index this node may purge its log up to while every standby that holds it can still be served. */
  purgeFloor(): number {
    let floor = Infinity;
    for (const [name, h] of this.holds) {
      if (mono() - h.at >= this.settings.holdMs) {
        this.logger.warn('link: a standby stopped reading: this node no longer keeps its log for it', { reader: name, after: h.after });
        this.holds.delete(name);
        this.saveHolds();
        continue;
      }
      floor = Math.min(floor, h.after - 1);
    }
    return floor;
  }

  private saveHolds(): void {
    if (this.node.t.dead) return;
    this.holdsSavedAt = Date.now();
    const readers: Record<string, { after: number; seenMs: number }> = {};
    for (const [name, h] of this.holds) readers[name] = { after: h.after, seenMs: h.seenMs };
    try {
      writeJsonAtomic(this.dir, HOLDS_FILE, { readers });
    } catch (e) {
      this.logger.warn(`link: ${HOLDS_FILE} was not written: a restart of this node forgets its standbys' holds`, { error: String(e) });
    }
  }

  private loadHolds(): void {
    try {
      const file = JSON.parse(readFileSync(join(this.dir, HOLDS_FILE), 'utf8')) as { readers: Record<string, { after: number; seenMs: number }> };
      // A restarted node gives every standby it knew at least a minute to say where it is.
      for (const [name, h] of Object.entries(file.readers ?? {})) {
        const age = Math.min(Math.max(0, Date.now() - h.seenMs), Math.max(0, this.settings.holdMs - 60_000));
        this.holds.set(name, { after: h.after, at: mono() - age, seenMs: h.seenMs });
      }
    } catch {
      // no holds yet
    }
  }

  // ---- what it says ----------------------------------------------------------------------

  private followerView(): Record<string, unknown> {
    const f = this.follower;
    const position = this.state?.position ?? { index: 0, term: 0, ts: 0 };
    const lagEntries = Math.max(0, f.sourceApplied - Math.max(f.scanned, position.index));
    return {
      state: f.state,
      source: f.source,
      scanned: f.scanned,
      sourceApplied: f.sourceApplied,
      lagEntries,
      lagMs: lagEntries === 0 ? 0 : Math.max(0, Date.now() - position.ts),
      entries: f.entries,
      lastAnswerMs: f.lastAnswerAt > 0 ? Math.max(0, Date.now() - f.lastAnswerAt) : null,
      error: f.error,
    };
  }

  /** The node's own view of the link; null on a cluster that follows nobody and that nobody reads. */
  view(): Record<string, unknown> | null {
    const link = this.state;
    const readers = [...this.holds.entries()].filter(([, h]) => mono() - h.at < this.settings.holdMs);
    if (!link && this.settings.sources.length === 0 && readers.length === 0) return null;
    const out: Record<string, unknown> = { role: this.role() };
    const position = (p: LinkPosition) => ({ index: p.index, term: p.term, nowUs: p.ts * 1000 });
    if (link?.role === 'standby') {
      Object.assign(out, { id: link.id, name: this.readerName(link.id), source: link.source, sinceUs: link.since * 1000, position: position(link.position) });
    } else if (link?.role === 'promoted') {
      Object.assign(out, { id: link.id, source: link.source, promotedAtUs: (link.promotedAt ?? 0) * 1000, position: position(link.position) });
    }
    if (this.settings.sources.length > 0 && link?.role !== 'promoted') {
      out.follower = this.followerView();
      out.configuredSource = this.settings.sources;
    }
    if (readers.length > 0) {
      out.readers = readers.sort(([a], [b]) => a.localeCompare(b)).map(([name, h]) => ({ name, after: h.after, idleMs: Math.round(mono() - h.at) }));
      out.holding = true;
    }
    return out;
  }

  /** GET /api/v1/system/link. */
  status(): Record<string, unknown> {
    const leader = this.node.state === 'leader';
    return { ...(this.view() ?? { role: 'primary' }), leader };
  }

  /** The link's part of /metrics/prometheus: nothing on a cluster that follows nobody and that nobody reads. */
  prometheus(): string[] {
    const v = this.view();
    if (!v) return [];
    const role = this.role();
    const lines = ['primary', 'standby', 'promoted'].map((r) => `queen_link_role{role="${r}"} ${r === role ? 1 : 0}`);
    if (this.state) lines.push(`queen_link_position_index ${this.state.position.index}`);
    const f = v.follower as ReturnType<LinkNode['followerView']> | undefined;
    if (f) {
      for (const s of ['idle', 'following', 'waiting', 'halted']) lines.push(`queen_link_follower_state{state="${s}"} ${f.state === s ? 1 : 0}`);
      lines.push(`queen_link_lag_entries ${f.lagEntries}`, `queen_link_lag_seconds ${((f.lagMs as number) / 1000).toFixed(3)}`);
      if (f.lastAnswerMs !== null) lines.push(`queen_link_last_answer_seconds ${((f.lastAnswerMs as number) / 1000).toFixed(3)}`);
      lines.push(`queen_link_entries_total ${f.entries}`);
    }
    const readers = (v.readers ?? []) as { name: string; after: number; idleMs: number }[];
    if (readers.length > 0) {
      lines.push(`queen_link_readers ${readers.length}`);
      for (const r of readers) lines.push(`queen_link_reader_behind_entries{reader="${r.name}"} ${Math.max(0, this.sm.applied - r.after)}`);
      for (const r of readers) lines.push(`queen_link_reader_idle_seconds{reader="${r.name}"} ${(r.idleMs / 1000).toFixed(3)}`);
      lines.push('queen_link_holding 1');
    }
    return lines;
  }
}

/**
 * What a source serves of one of its entries: a client's command (a mirrored one unwrapped: a
 * source that was a standby once serves what it replayed), nothing for a consensus entry or for
 * the link's own role rows (they are this cluster's own).
 */
function servedCommand(e: Entry): Command | null {
  if (e.kind !== 'cmd' || !e.cmd) return null;
  if (e.cmd.t !== 'link') return e.cmd;
  return e.cmd.op === 'mirror' ? e.cmd.cmd : null;
}
