// The chaos cells' reading of the membership changes from the brokers' Raft logs
// (test/chaos/membership.ts): the configuration entries of log.jsonl files as the simulator writes
// them, followed across appends and rewrites, an overwritten entry not counted, a joint
// configuration not a change of its own, and a change made twice found.
import { appendFileSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { changeKey, MembershipReader, membershipViolations } from '../chaos/membership.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const folder = () => {
  const d = mkdtempSync(join(tmpdir(), 'queen-chaos-log-'));
  dirs.push(d);
  return d;
};

const nodes = (ids: number[]) => Object.fromEntries(ids.map((id) => [String(id), { raft: `127.0.0.${id}:6633`, http: `127.0.0.${id}:6632` }]));
const config = (voters: number[], learners: number[] = [], joint: [number[], number[]] | null = null) => ({
  voters,
  joint,
  learners,
  nodes: nodes([...voters, ...learners]),
  clusterId: 'c1',
  clusterVersion: 4,
});
/** An entry as the simulator writes it: index, term, ts, kind first. */
const entry = (index: number, term: number, membership?: ReturnType<typeof config>, ts = 1) =>
  JSON.stringify(membership ? { index, term, ts, kind: 'membership', membership } : { index, term, ts, kind: 'cmd', cmd: { t: 'push', items: [] } });
const write = (dir: string, lines: string[], purged = 0) => writeFileSync(join(dir, 'log.jsonl'), [JSON.stringify({ purgedIndex: purged, purgedTerm: 0 }), ...lines].join('\n') + '\n');
const keys = (r: MembershipReader, after = 0) => r.changes(after).map(changeKey);

describe('membership changes from the Raft logs', () => {
  it('a scale-up: two learners, then one promotion through a joint configuration', () => {
    const d = folder();
    write(d, [entry(1, 0, config([1, 2, 3])), entry(2, 1), entry(3, 1)]);
    const r = new MembershipReader();
    r.folders.add(d);
    r.read();
    const before = r.lastIndex();
    expect(before).toBe(3);
    appendFileSync(
      join(d, 'log.jsonl'),
      [entry(4, 1, config([1, 2, 3], [4])), entry(5, 1, config([1, 2, 3], [4, 5])), entry(6, 1), entry(7, 1, config([1, 2, 3, 4, 5], [], [[1, 2, 3], [1, 2, 3, 4, 5]])), entry(8, 1, config([1, 2, 3, 4, 5]))].join('\n') + '\n',
    );
    r.read();
    expect(keys(r, before)).toEqual(['learner 4', 'learner 5', 'promote 4', 'promote 5']);
    expect(membershipViolations(r.changes(before), ['learner 4', 'learner 5', 'promote 4', 'promote 5'])).toEqual([]);
    expect(r.jointAtEnd()).toBeNull();
  });

  it('a replacement that removes its node again after adding it back is found, and so is a change not meant', () => {
    const d = folder();
    write(d, [
      entry(1, 0, config([1, 2, 3])),
      entry(2, 1, config([1, 3], [], [[1, 2, 3], [1, 3]])),
      entry(3, 1, config([1, 3])),
      entry(4, 1, config([1, 3], [2])),
      // A second removal and addition, as a step done twice would make.
      entry(5, 1, config([1, 3])),
      entry(6, 1, config([1, 3], [2])),
      entry(7, 1, config([1, 2, 3], [], [[1, 3], [1, 2, 3]])),
      entry(8, 1, config([1, 2, 3])),
    ]);
    const r = new MembershipReader();
    r.folders.add(d);
    r.read();
    expect(keys(r)).toEqual(['remove 2', 'learner 2', 'remove 2', 'learner 2', 'promote 2']);
    expect(membershipViolations(r.changes(), ['remove 2', 'learner 2', 'promote 2'])).toEqual([
      'the membership change "remove 2" is in the Raft log 2 times (indexes 3, 5)',
      'the membership change "learner 2" is in the Raft log 2 times (indexes 4, 6)',
    ]);
    expect(membershipViolations([{ index: 9, kind: 'remove', node: 1 }], ['remove 2'])).toEqual([
      'the membership change "remove 1" is in the Raft log, and the operation does not make it',
      'the membership change "remove 2" is not in the Raft log',
    ]);
  });

  it('an entry a later leader overwrote does not count; the same entry in two logs counts once', () => {
    const a = folder();
    const b = folder();
    // Node a led in term 1 and wrote a learner at index 4 that never committed; b's leader of term 2 wrote a blank there.
    write(a, [entry(1, 0, config([1, 2, 3])), entry(2, 1), entry(3, 1, config([1, 2, 3], [4])), entry(4, 1, config([1, 2, 3], [4, 5]))]);
    write(b, [entry(1, 0, config([1, 2, 3])), entry(2, 1), entry(3, 1, config([1, 2, 3], [4])), entry(4, 2), entry(5, 2, config([1, 2, 3], [4, 5]))]);
    const r = new MembershipReader();
    r.folders.add(a);
    r.folders.add(b);
    r.read();
    expect(keys(r)).toEqual(['learner 4', 'learner 5']);
    expect(r.changes().map((c) => c.index)).toEqual([3, 5]);
  });

  it('follows a log rewritten by a purge or a snapshot (entries read before are kept), and a torn last line', () => {
    const d = folder();
    write(d, [entry(1, 0, config([1, 2, 3])), entry(2, 1, config([1, 2, 3], [4]))]);
    const r = new MembershipReader();
    r.folders.add(d);
    r.read();
    // A purge: a new file (rename), starting after index 2.
    const tmp = join(d, 'log.jsonl.tmp');
    writeFileSync(tmp, [JSON.stringify({ purgedIndex: 2, purgedTerm: 1 }), entry(3, 1)].join('\n') + '\n');
    renameSync(tmp, join(d, 'log.jsonl'));
    r.read();
    const half = entry(4, 1, config([1, 2, 3, 4], [], [[1, 2, 3], [1, 2, 3, 4]]));
    appendFileSync(join(d, 'log.jsonl'), half.slice(0, 20));
    r.read();
    expect(r.jointAtEnd()).toBeNull();
    appendFileSync(join(d, 'log.jsonl'), half.slice(20) + '\n');
    r.read();
    expect(r.jointAtEnd()).toBe('[[1,2,3],[1,2,3,4]] at index 4');
    appendFileSync(join(d, 'log.jsonl'), entry(5, 1, config([1, 2, 3, 4])) + '\n');
    r.read();
    expect(keys(r)).toEqual(['learner 4', 'promote 4']);
    expect(r.jointAtEnd()).toBeNull();
    expect(r.lastIndex()).toBe(5);
  });

  it("each change's own time as the leader's log tells it: from its first entry proposed to the entry after its last", () => {
    const d = folder();
    write(d, [
      entry(1, 0, config([1, 2, 3, 4, 5])),
      entry(2, 1, undefined, 1000),
      // Node 5 removed: a joint entry, then the final one once the joint committed; writes resume after.
      entry(3, 1, config([1, 2, 3, 4], [], [[1, 2, 3, 4, 5], [1, 2, 3, 4]]), 1100),
      entry(4, 1, config([1, 2, 3, 4]), 1130),
      entry(5, 1, undefined, 1175),
      // A learner: one entry.
      entry(6, 1, config([1, 2, 3, 4], [5]), 2000),
      entry(7, 1, undefined, 2020),
      // The last change, nothing after it yet.
      entry(8, 1, config([1, 2, 3, 4, 5], [], [[1, 2, 3, 4], [1, 2, 3, 4, 5]]), 3000),
      entry(9, 1, config([1, 2, 3, 4, 5]), 3040),
    ]);
    const r = new MembershipReader();
    r.folders.add(d);
    r.read();
    expect(r.changeTimes(2)).toEqual([
      { index: 4, changes: ['remove 5'], ms: 75 },
      { index: 6, changes: ['learner 5'], ms: 20 },
      { index: 9, changes: ['promote 5'], ms: null },
    ]);
  });
});
