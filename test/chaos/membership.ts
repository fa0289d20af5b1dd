// The cluster's membership changes as the brokers recorded them: the configuration entries of
// their Raft logs, read from the voters' volumes (the simulator keeps its log in
// <volume>/log.jsonl, one entry per line; no HTTP route lists its entries). Every pod's log is
// followed while the operation runs (a purge or a snapshot rewrites the file; entries once read
// are kept), entries are told apart by index and term, and an entry a later leader overwrote (a
// higher term at the same index) does not count. Consecutive configurations that are not joint
// give the changes: a node added as a learner, promoted to voter, demoted, removed. Each change an
// operation makes is in the log once; one made twice (a member removed again after a crash, a
// learner added twice) is there twice.
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { control } from '../testbed/client.ts';

interface Config {
  voters: number[];
  joint: [number[], number[]] | null;
  learners: number[];
}

interface ConfigEntry {
  index: number;
  term: number;
  /** The leader's clock when it proposed the entry (ms since the epoch). */
  ts: number | null;
  config: Config;
}

export type ChangeKind = 'learner' | 'promote' | 'demote' | 'remove';

/**
 * A membership change's own time as the leader's log tells it: from its first configuration entry
 * proposed (the joint one, for a change of voters) to the entry proposed right after its last one
 * (the leader holds its writes while a change commits, and proposes the next as soon as it is done).
 */
export interface ChangeTime {
  /** The index of its last configuration entry. */
  index: number;
  /** The changes it made ("remove 5"). */
  changes: string[];
  /** Null when no entry followed it yet. */
  ms: number | null;
}

export interface MembershipChange {
  /** The index of the configuration entry that made it. */
  index: number;
  kind: ChangeKind;
  node: number;
}

/** `learner 4`, `promote 4`, `remove 2`. */
export const changeKey = (c: { kind: ChangeKind; node: number }) => `${c.kind} ${c.node}`;

interface Tail {
  ino: number;
  offset: number;
  rest: string;
}

export interface MembershipLog {
  /** Reads what the logs appended since the last look (also done every `pollMs`). */
  poll(): Promise<void>;
  /** The highest index read so far: what a later window starts after. */
  lastIndex(): number;
  /** The changes made by entries with an index in (after, upTo]. */
  changes(after?: number, upTo?: number): MembershipChange[];
  /** A configuration entry left joint at the end of the log (a voter change not finished). */
  jointAtEnd(): string | null;
  /** Each membership change after index `after`, with its own time as the leader's log tells it (`baseline`: the membership before it). */
  changeTimes(after?: number, baseline?: { voters: number[]; learners: number[] }): ChangeTime[];
  /** Volumes that could not be read (for a note). */
  problems: string[];
  stop(): void;
}

const HEAD = /^\{"index":(\d+),"term":(\d+),(?:"ts":(\d+),)?/;

/** What changed from one configuration to the next: nodes added as learners, promoted, demoted, removed. */
function diff(prev: Pick<Config, 'voters' | 'learners'>, next: Pick<Config, 'voters' | 'learners'>): { kind: ChangeKind; node: number }[] {
  const v0 = new Set(prev.voters);
  const l0 = new Set(prev.learners);
  const v1 = new Set(next.voters);
  const l1 = new Set(next.learners);
  const out: { kind: ChangeKind; node: number }[] = [];
  for (const id of [...new Set([...v0, ...l0, ...v1, ...l1])].sort((a, b) => a - b)) {
    const was = v0.has(id) ? 'voter' : l0.has(id) ? 'learner' : null;
    const is = v1.has(id) ? 'voter' : l1.has(id) ? 'learner' : null;
    const kind: ChangeKind | null = was === is ? null : is === 'learner' ? (was ? 'demote' : 'learner') : is === 'voter' ? 'promote' : 'remove';
    if (kind) out.push({ kind, node: id });
  }
  return out;
}

/** Reads the Raft logs (log.jsonl) of some volume folders, each from where the last read ended. */
export class MembershipReader {
  readonly folders = new Set<string>();
  readonly problems: string[] = [];
  private tails = new Map<string, Tail>();
  /** The highest term seen at each index, over every log. */
  private termAt = new Map<number, number>();
  private configs = new Map<string, ConfigEntry>();
  private maxIndex = 0;
  /** The leader's clock on the entry right after each configuration entry, by that entry's index. */
  private nextTs = new Map<number, number>();

  /** Reads what each folder's log appended since the last read. */
  read(): void {
    for (const dir of this.folders) {
      try {
        for (const line of this.lines(join(dir, 'log.jsonl'))) this.take(line);
      } catch (e) {
        this.problems.push(`${dir}: ${(e as Error).message}`);
      }
    }
  }

  lastIndex(): number {
    return this.maxIndex;
  }

  private lines(file: string): string[] {
    let st;
    try {
      st = statSync(file);
    } catch {
      return [];
    }
    let t = this.tails.get(file);
    // A purge, a truncation or a snapshot writes a new file: read it again from its start.
    if (!t || t.ino !== st.ino || st.size < t.offset) t = { ino: st.ino, offset: 0, rest: '' };
    this.tails.set(file, t);
    if (st.size === t.offset) return [];
    const fd = openSync(file, 'r');
    try {
      const buf = Buffer.alloc(st.size - t.offset);
      const n = readSync(fd, buf, 0, buf.length, t.offset);
      t.offset += n;
      const text = t.rest + buf.subarray(0, n).toString('utf8');
      const cut = text.lastIndexOf('\n');
      t.rest = text.slice(cut + 1);
      return cut < 0 ? [] : text.slice(0, cut).split('\n');
    } finally {
      closeSync(fd);
    }
  }

  private take(line: string): void {
    const m = HEAD.exec(line);
    if (!m) return; // the header ({purgedIndex, purgedTerm})
    const index = Number(m[1]);
    const term = Number(m[2]);
    const ts = m[3] === undefined ? null : Number(m[3]);
    this.termAt.set(index, Math.max(this.termAt.get(index) ?? -1, term));
    this.maxIndex = Math.max(this.maxIndex, index);
    if (ts !== null && this.configs.has(`${index - 1}:${term}`) && !this.nextTs.has(index - 1)) this.nextTs.set(index - 1, ts);
    if (!line.includes('"kind":"membership"')) return;
    const key = `${index}:${term}`;
    if (this.configs.has(key)) return;
    const e = JSON.parse(line) as { kind?: string; membership?: Config };
    if (e.kind === 'membership' && e.membership) {
      this.configs.set(key, { index, term, ts, config: { voters: e.membership.voters, joint: e.membership.joint, learners: e.membership.learners } });
    }
  }

  /** The configuration entries that stand (not overwritten by a later leader), in index order. */
  private chain(): ConfigEntry[] {
    return [...this.configs.values()].filter((c) => this.termAt.get(c.index) === c.term).sort((a, b) => a.index - b.index);
  }

  /** The changes made by entries with an index in (after, upTo]. */
  changes(after = 0, upTo = Infinity): MembershipChange[] {
    const out: MembershipChange[] = [];
    let prev: ConfigEntry | null = null;
    for (const e of this.chain()) {
      if (e.config.joint) continue;
      if (prev && e.index > after && e.index <= upTo) out.push(...diff(prev.config, e.config).map((c) => ({ index: e.index, ...c })));
      prev = e;
    }
    return out;
  }

  /**
   * Each membership change after index `after`, with its own time as the leader's log tells it
   * (ChangeTime). `baseline`: the membership before the first one, when the logs no longer hold the
   * entry that made it (a snapshot or a purge took it).
   */
  changeTimes(after = 0, baseline?: Pick<Config, 'voters' | 'learners'>): ChangeTime[] {
    const out: ChangeTime[] = [];
    let began: number | null = null;
    let prev: Pick<Config, 'voters' | 'learners'> | null = null;
    for (const e of this.chain()) {
      if (e.config.joint) {
        if (e.index > after) began ??= e.ts;
        continue;
      }
      if (e.index > after) {
        const from = prev ?? baseline;
        const first = began ?? e.ts;
        const next = this.nextTs.get(e.index);
        out.push({ index: e.index, changes: from ? diff(from, e.config).map(changeKey) : [], ms: first !== null && next !== undefined ? next - first : null });
      }
      began = null;
      prev = e.config;
    }
    return out;
  }

  /** A configuration entry left joint at the end of the log (a voter change not finished). */
  jointAtEnd(): string | null {
    const last = this.chain().at(-1);
    return last?.config.joint ? `[[${last.config.joint[0].join(',')}],[${last.config.joint[1].join(',')}]] at index ${last.index}` : null;
  }
}

/** Follows the Raft logs of the pods `<name>-N` of `namespace` (their data volumes) every `pollMs`. */
export async function followMembership(namespace: string, name = 'queen', pollMs = 2000): Promise<MembershipLog> {
  const reader = new MembershipReader();
  const podName = new RegExp(`^${name}-\\d+$`);
  let polling: Promise<void> | null = null;
  const once = async () => {
    try {
      for (const p of await control.pods()) if (p.namespace === namespace && podName.test(p.name) && p.volumes?.data) reader.folders.add(p.volumes.data);
    } catch (e) {
      reader.problems.push(`the pods could not be listed: ${(e as Error).message}`);
    }
    reader.read();
  };
  const poll = () => (polling ??= once().finally(() => (polling = null)));
  await poll();
  const timer = setInterval(() => void poll(), pollMs);
  return {
    poll,
    lastIndex: () => reader.lastIndex(),
    problems: reader.problems,
    changes: (after, upTo) => reader.changes(after, upTo),
    jointAtEnd: () => reader.jointAtEnd(),
    changeTimes: (after, baseline) => reader.changeTimes(after, baseline),
    stop: () => clearInterval(timer),
  };
}

/**
 * What the changes of one operation break: a change made more than once, a change the operation
 * does not make, one it makes that is not there (`expected` is a list of change keys; null: only
 * "each at most once").
 */
export function membershipViolations(changes: MembershipChange[], expected: string[] | null): string[] {
  const count = new Map<string, number[]>();
  for (const c of changes) count.set(changeKey(c), [...(count.get(changeKey(c)) ?? []), c.index]);
  const out: string[] = [];
  for (const [key, at] of count) if (at.length > 1) out.push(`the membership change "${key}" is in the Raft log ${at.length} times (indexes ${at.join(', ')})`);
  if (expected) {
    for (const key of count.keys()) if (!expected.includes(key)) out.push(`the membership change "${key}" is in the Raft log, and the operation does not make it`);
    for (const key of expected) if (!count.has(key)) out.push(`the membership change "${key}" is not in the Raft log`);
  }
  return out;
}
