// Shared shapes of the simulator: log entries, membership configurations, commands.

export interface NodeAddrs {
  raft: string;
  http: string;
}

// A membership configuration as stored in a log entry. While a voter change sits between its two
// steps, `joint` holds [old voter set, new voter set] and `voters` is the new set.
export interface MembershipConfig {
  voters: number[];
  joint: [number[], number[]] | null;
  learners: number[];
  nodes: Record<string, NodeAddrs>;
  clusterId: string;
  clusterVersion: number;
}

export interface PushItem {
  queue: string;
  partition: string;
  payload: unknown;
  transactionId: string;
}

export type Command =
  | {
      t: 'kv';
      ns: string;
      key: string;
      value: unknown;
      ttlSeconds: number | null;
      expect: number | null;
      required: boolean;
    }
  | { t: 'push'; items: PushItem[] }
  | { t: 'pop'; queue: string; partition: string | null; batch: number }
  | LinkCommand;

/** Where a standby is in its source's log: the last source entry it applied, and that entry's timestamp (ms). */
export interface LinkPosition {
  index: number;
  term: number;
  ts: number;
}

/**
 * The link's own entries on a standby (link.ts, test/sim/LINK.md): the standby entry that makes the
 * cluster one, each source entry replayed with the position it brings, and the promotion.
 */
export type LinkCommand =
  | { t: 'link'; op: 'attach'; id: string; source: string; position: LinkPosition; at: number }
  | { t: 'link'; op: 'mirror'; prev: number; position: LinkPosition; cmd: Command; pad?: number }
  | { t: 'link'; op: 'promote'; at: number };

/** The cluster's part in a link, as its applied state says (absent: never part of one). */
export interface LinkState {
  role: 'standby' | 'promoted';
  id: string;
  source: string;
  position: LinkPosition;
  /** When it became a standby, and when it was promoted (ms, the wall clock of the leader that wrote it). */
  since: number;
  promotedAt?: number;
}

export interface Entry {
  index: number;
  term: number;
  ts: number; // leader's wall clock when proposed (ms since the epoch)
  /** `version`: the leader raises the cluster's catalogue version to `version` (the broker's ClusterVersionSet). */
  kind: 'blank' | 'membership' | 'cmd' | 'version';
  membership?: MembershipConfig;
  version?: number;
  cmd?: Command;
  /** Bytes this entry counts for beyond its own JSON (QUEEN_SIM_ENTRY_BYTES): not written, but counted as written. */
  pad?: number;
}

export interface SkipRecord {
  index: number;
  term: number;
  digest: string;
}

export interface ApplyFailure {
  index: number;
  term: number;
  digest: string;
  kind: string;
  error: string;
}

export function voterSets(c: MembershipConfig): number[][] {
  return c.joint ? [c.joint[0], c.joint[1]] : [c.voters];
}

export function allVoters(c: MembershipConfig): number[] {
  const s = new Set<number>();
  for (const set of voterSets(c)) for (const id of set) s.add(id);
  return [...s].sort((a, b) => a - b);
}

export function allMembers(c: MembershipConfig): number[] {
  const s = new Set<number>(allVoters(c));
  for (const id of c.learners) s.add(id);
  return [...s].sort((a, b) => a - b);
}

export function sameSet(a: number[], b: number[]): boolean {
  if (a.length !== b.length) return false;
  const s = new Set(a);
  return b.every((x) => s.has(x)) && new Set(b).size === s.size;
}

export function sorted(a: Iterable<number>): number[] {
  return [...new Set(a)].sort((x, y) => x - y);
}
