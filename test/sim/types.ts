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
  | { t: 'pop'; queue: string; partition: string | null; batch: number };

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
