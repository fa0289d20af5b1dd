// What one node keeps on its volume (the data dir): raft meta (term, vote), the log, the applied
// state, the known commit index, a staged snapshot. Deleting the folder's contents loses it all.
//
//   meta.json          {term, votedFor, forceRecovered}
//   log.jsonl          first line {purgedIndex, purgedTerm}, then one entry per line
//   commit.json        {commit}
//   state.json         the applied state (SmState) at some applied index
//   snapshot.pending   a received snapshot waiting for the next boot
//   sim-filler.bin     filler written by POST /_sim/fill (counts against the volume)

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Entry } from './types.ts';
import { emptyState, type SmState } from './statemachine.ts';
import type { NodeScope } from './scope.ts';

export interface Meta {
  term: number;
  votedFor: number | null;
  forceRecovered: boolean;
}

export interface SnapshotPayload {
  index: number;
  term: number;
  state: SmState;
}

export class DiskFullError extends Error {}
export class DamagedError extends Error {}

const META = 'meta.json';
const LOG = 'log.jsonl';
const COMMIT = 'commit.json';
/** The commit file's fixed size: `{"commit":N}` for any safe integer N, padded with spaces. */
const COMMIT_RECORD_BYTES = 32;
const STATE = 'state.json';
const PENDING = 'snapshot.pending';
export const FILLER = 'sim-filler.bin';

export function dirSize(dir: string): number {
  let total = 0;
  let names: fs.Dirent[];
  try {
    names = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const d of names) {
    const p = path.join(dir, d.name);
    try {
      if (d.isDirectory()) total += dirSize(p);
      else total += fs.statSync(p).size;
    } catch {
      // vanished meanwhile
    }
  }
  return total;
}

const sizes = new WeakMap<Entry, number>();

export class Store {
  dir: string;
  volumeBytes: number | null;
  meta: Meta = { term: 0, votedFor: null, forceRecovered: false };
  // log[i] holds the entry with index purgedIndex + 1 + i
  log: Entry[] = [];
  purgedIndex = 0;
  purgedTerm = 0;
  commit = 0;
  state: SmState = emptyState();
  stateJson = ''; // last state written to disk (what a snapshot sends)
  stateIndex = 0; // applied index of stateJson
  stateTerm = 0;
  private measured = 0;
  private written = 0; // bytes written since the last measurement (estimate)
  private logBytes = 0;
  // Entry padding (QUEEN_SIM_ENTRY_BYTES): bytes counted as written though no file holds them.
  private logPad = 0;
  private statePad = 0;
  /** The commit file, open once the first commit is written (saveCommit). */
  private commitFd: number | null = null;

  /** The node's scope: a node that ended writes nothing more (a killed process writes nothing). */
  private scope: NodeScope | null;

  constructor(dir: string, volumeBytes: number | null, scope: NodeScope | null = null) {
    this.dir = dir;
    this.volumeBytes = volumeBytes;
    this.scope = scope;
  }

  private get ended(): boolean {
    return this.scope?.dead === true;
  }

  p(name: string): string {
    return path.join(this.dir, name);
  }

  open(): { installedSnapshot: SnapshotPayload | null } {
    fs.mkdirSync(this.dir, { recursive: true });
    let installed: SnapshotPayload | null = null;
    if (fs.existsSync(this.p(PENDING))) installed = this.installPending();
    const readJson = (name: string): unknown => {
      const raw = fs.readFileSync(this.p(name), 'utf8');
      try {
        return JSON.parse(raw);
      } catch {
        throw new DamagedError(`${name} in ${this.dir} is damaged`);
      }
    };
    if (fs.existsSync(this.p(META))) {
      const m = readJson(META) as Partial<Meta>;
      this.meta = { term: m.term ?? 0, votedFor: m.votedFor ?? null, forceRecovered: m.forceRecovered ?? false };
    }
    if (fs.existsSync(this.p(STATE))) {
      this.state = readJson(STATE) as SmState;
      this.stateJson = JSON.stringify(this.state);
      this.stateIndex = this.state.applied;
      this.stateTerm = this.state.appliedTerm;
      this.statePad = this.state.pad ?? 0;
    }
    if (fs.existsSync(this.p(COMMIT))) this.commit = (readJson(COMMIT) as { commit: number }).commit;
    if (fs.existsSync(this.p(LOG))) {
      const raw = fs.readFileSync(this.p(LOG), 'utf8');
      this.logBytes = raw.length;
      const lines = raw.split('\n');
      let first = true;
      for (let i = 0; i < lines.length; i++) {
        const line = lines[i]!;
        if (line === '') continue;
        let obj: unknown;
        try {
          obj = JSON.parse(line);
        } catch {
          // A torn last line (process killed mid-write) is dropped; anything else is damage.
          if (lines.slice(i + 1).every((l) => l === '')) break;
          throw new DamagedError(`${LOG} in ${this.dir} is damaged at line ${i + 1}`);
        }
        if (first) {
          const h = obj as { purgedIndex: number; purgedTerm: number };
          this.purgedIndex = h.purgedIndex;
          this.purgedTerm = h.purgedTerm;
          first = false;
          continue;
        }
        const e = obj as Entry;
        if (e.index !== this.purgedIndex + this.log.length + 1) throw new DamagedError(`${LOG} in ${this.dir}: entry ${e.index} out of order`);
        this.log.push(e);
        this.logPad += e.pad ?? 0;
      }
    }
    if (this.commit < this.purgedIndex) this.commit = this.purgedIndex;
    if (this.commit > this.lastIndex()) this.commit = this.lastIndex();
    if (this.state.applied > this.lastIndex()) {
      throw new DamagedError(`the store in ${this.dir} applied ${this.state.applied} but the log ends at ${this.lastIndex()}`);
    }
    if (this.state.applied < this.purgedIndex) {
      throw new DamagedError(`the store in ${this.dir} is behind the purged log (applied ${this.state.applied}, purged ${this.purgedIndex})`);
    }
    this.measure();
    return { installedSnapshot: installed };
  }

  // A node holds state once it has a log, applied state or a snapshot.
  hasState(): boolean {
    return this.lastIndex() > 0 || this.state.membership !== null;
  }

  lastIndex(): number {
    return this.purgedIndex + this.log.length;
  }

  lastTerm(): number {
    return this.log.length > 0 ? this.log[this.log.length - 1]!.term : this.purgedTerm;
  }

  entry(index: number): Entry | undefined {
    if (index <= this.purgedIndex) return undefined;
    return this.log[index - this.purgedIndex - 1];
  }

  termAt(index: number): number | undefined {
    if (index === 0) return 0;
    if (index === this.purgedIndex) return this.purgedTerm;
    return this.entry(index)?.term;
  }

  slice(from: number, toInclusive: number): Entry[] {
    const a = Math.max(from, this.purgedIndex + 1) - this.purgedIndex - 1;
    const b = toInclusive - this.purgedIndex;
    return this.log.slice(a, b);
  }

  // ---- disk accounting -------------------------------------------------------------------

  measure(): number {
    this.measured = dirSize(this.dir);
    this.written = 0;
    return this.measured;
  }

  usage(): number {
    return this.measured + this.written + this.logPad + this.statePad;
  }

  /** What a boot replays: the saved state and the log, padding included. */
  replayBytes(): number {
    return this.stateJson.length + this.statePad + this.logBytes + this.logPad;
  }

  /** What a snapshot of the saved state weighs, padding included. */
  snapshotBytes(): number {
    return this.stateJson.length + this.statePad;
  }

  /** The size an entry counts for on the wire and on disk. */
  static entryBytes(e: Entry): number {
    let n = sizes.get(e);
    if (n === undefined) {
      n = JSON.stringify(e).length + 1;
      sizes.set(e, n);
    }
    return n + (e.pad ?? 0);
  }

  private reserve(bytes: number): void {
    if (this.volumeBytes !== null && this.usage() + bytes > this.volumeBytes) {
      throw new DiskFullError(`ENOSPC: no space left on device (writing ${bytes} bytes in ${this.dir})`);
    }
    this.written += bytes;
  }

  private writeAtomic(name: string, data: string): void {
    if (this.ended) return;
    let old = 0;
    try {
      old = fs.statSync(this.p(name)).size;
    } catch {
      // absent
    }
    this.reserve(Math.max(0, data.length - old));
    const tmp = this.p(name + '.tmp');
    fs.writeFileSync(tmp, data);
    fs.renameSync(tmp, this.p(name));
    if (data.length < old) this.written -= old - data.length;
  }

  // ---- writes ----------------------------------------------------------------------------

  saveMeta(): void {
    this.writeAtomic(META, JSON.stringify(this.meta));
  }

  /**
   * The commit index, written in place: one write of a fixed-size record over the same bytes (a
   * JSON object padded with spaces) through a file kept open. It changes with every commit, and a
   * temporary file renamed over the old one each time was the simulator's largest cost under
   * load. A write this small reaches the page cache whole or not at all, so a killed node leaves
   * the old index or the new one, as the rename did; it never grows, so it never fills the disk.
   */
  saveCommit(commit: number): void {
    this.commit = commit;
    if (this.ended) return;
    if (this.commitFd === null) {
      // Not truncated on open: a node killed between the open and the write keeps its old index.
      this.commitFd = fs.openSync(this.p(COMMIT), fs.constants.O_WRONLY | fs.constants.O_CREAT);
      this.scope?.onKill(() => this.closeCommit());
    }
    fs.writeSync(this.commitFd, JSON.stringify({ commit }).padEnd(COMMIT_RECORD_BYTES, ' '), 0);
  }

  /** Closes the commit file (the node ended). */
  private closeCommit(): void {
    if (this.commitFd === null) return;
    try {
      fs.closeSync(this.commitFd);
    } catch {
      // closed already
    }
    this.commitFd = null;
  }

  appendEntries(entries: Entry[]): void {
    if (entries.length === 0 || this.ended) return;
    let data = '';
    if (!fs.existsSync(this.p(LOG))) data = JSON.stringify({ purgedIndex: this.purgedIndex, purgedTerm: this.purgedTerm }) + '\n';
    let pad = 0;
    for (const e of entries) {
      data += JSON.stringify(e) + '\n';
      pad += e.pad ?? 0;
    }
    this.reserve(data.length + pad);
    fs.appendFileSync(this.p(LOG), data);
    this.logBytes += data.length;
    this.written -= pad;
    this.logPad += pad;
    for (const e of entries) this.log.push(e);
  }

  private rewriteLog(): void {
    let data = JSON.stringify({ purgedIndex: this.purgedIndex, purgedTerm: this.purgedTerm }) + '\n';
    for (const e of this.log) data += JSON.stringify(e) + '\n';
    this.writeAtomic(LOG, data);
    this.logBytes = data.length;
  }

  // Drops entries from `index` on (a conflicting suffix on a follower).
  truncateFrom(index: number): void {
    const keep = index - this.purgedIndex - 1;
    if (keep < 0 || keep >= this.log.length) return;
    this.log.length = keep;
    this.logPad = this.log.reduce((n, e) => n + (e.pad ?? 0), 0);
    if (this.commit >= index) this.commit = index - 1;
    this.rewriteLog();
  }

  // Drops entries up to and including `index`.
  purgeTo(index: number): number {
    if (index <= this.purgedIndex) return 0;
    const n = index - this.purgedIndex;
    const last = this.log[n - 1]!;
    this.purgedTerm = last.term;
    this.purgedIndex = index;
    for (const e of this.log.splice(0, n)) this.logPad -= e.pad ?? 0;
    this.rewriteLog();
    return n;
  }

  saveState(s: SmState): void {
    const json = JSON.stringify(s);
    const grow = (s.pad ?? 0) - this.statePad;
    if (grow > 0) this.reserve(grow);
    this.written -= Math.max(0, grow);
    this.statePad = s.pad ?? 0;
    this.writeAtomic(STATE, json);
    this.stateJson = json;
    this.stateIndex = s.applied;
    this.stateTerm = s.appliedTerm;
  }

  // ---- snapshots -------------------------------------------------------------------------

  stageSnapshot(snap: SnapshotPayload): void {
    this.writeAtomic(PENDING, JSON.stringify(snap));
  }

  private installPending(): SnapshotPayload {
    const raw = fs.readFileSync(this.p(PENDING), 'utf8');
    let snap: SnapshotPayload;
    try {
      snap = JSON.parse(raw) as SnapshotPayload;
    } catch {
      throw new DamagedError(`${PENDING} in ${this.dir} is damaged`);
    }
    // Swap in: the state becomes the snapshot's, the log restarts right after it.
    fs.writeFileSync(this.p(STATE + '.tmp'), JSON.stringify(snap.state));
    fs.renameSync(this.p(STATE + '.tmp'), this.p(STATE));
    fs.writeFileSync(this.p(LOG + '.tmp'), JSON.stringify({ purgedIndex: snap.index, purgedTerm: snap.term }) + '\n');
    fs.renameSync(this.p(LOG + '.tmp'), this.p(LOG));
    fs.writeFileSync(this.p(COMMIT + '.tmp'), JSON.stringify({ commit: snap.index }));
    fs.renameSync(this.p(COMMIT + '.tmp'), this.p(COMMIT));
    fs.unlinkSync(this.p(PENDING));
    return snap;
  }

  // ---- test-bed filler -------------------------------------------------------------------

  fill(bytes: number): void {
    if (this.ended) return;
    const p = this.p(FILLER);
    if (bytes <= 0) {
      fs.rmSync(p, { force: true });
    } else {
      const fd = fs.openSync(p, 'w');
      try {
        const chunk = Buffer.alloc(Math.min(bytes, 1 << 20));
        let left = bytes;
        while (left > 0) {
          const n = Math.min(left, chunk.length);
          fs.writeSync(fd, chunk, 0, n);
          left -= n;
        }
      } finally {
        fs.closeSync(fd);
      }
    }
    this.measure();
  }
}
