// The pure rules of backups (plan/backup.ts): whose volume is taken, the backups past keep, the names.
import { describe, expect, it } from 'vitest';
import { backupName, backupSource, backupsPastKeep, restoring } from '../../plan/backup.ts';
import { cluster, member, pod, setMember } from './fixture.ts';

describe('the volume a backup takes', () => {
  it('a caught-up follower, the most caught up first, never the leader while one is', () => {
    const obs = cluster(3, 3, 1);
    setMember(obs, { ...member(2, true, 40), matched: 4960 });
    setMember(obs, { ...member(3, true, 5), matched: 4995 });
    const c = backupSource(obs, 100);
    expect(c).toMatchObject({ source: { ordinal: 2, nodeId: 3, commit: 5000, term: 3 } });
    expect('source' in c && c.source.why).toBe('a caught-up follower (5 entries behind the leader)');
  });

  it('never a voter that is behind, nor one not live, not Ready or not answering: the leader then', () => {
    const obs = cluster(3, 3, 1);
    setMember(obs, { ...member(2, true, 500), matched: 4500 });
    setMember(obs, { ...member(3, true, 0), live: false });
    expect(backupSource(obs, 100)).toMatchObject({ source: { nodeId: 1, why: 'the leader: no follower is live and caught up' } });
    const notReady = cluster(3, 3, 1);
    pod(notReady, 1).ready = false;
    delete notReady.health[2];
    expect(backupSource(notReady, 100)).toMatchObject({ source: { nodeId: 1 } });
  });

  it('node 1 of a restored cluster only when no other voter can be taken', () => {
    const obs = cluster(3, 3, 3);
    expect(backupSource(obs, 100, [1])).toMatchObject({ source: { nodeId: 2 } });
    setMember(obs, { ...member(2, true, 500) });
    expect(backupSource(obs, 100, [1])).toMatchObject({ source: { nodeId: 3, why: 'the leader: no follower is live and caught up' } });
    expect(backupSource(cluster(3, 3, 1), 100, [1])).toMatchObject({ source: { nodeId: 2 } });
  });

  it('the only voter of a cluster of one, and the voters it had then (a restore under another name is refused on them)', () => {
    expect(backupSource(cluster(1, 1, 1), 100)).toMatchObject({ source: { nodeId: 1, why: 'the only voter', voters: [1] } });
    expect(backupSource(cluster(3, 3, 1), 100)).toMatchObject({ source: { voters: [1, 2, 3] } });
  });

  it('waits without a leader, during a membership change, and when no voter can be taken', () => {
    const noLeader = cluster(3, 3, 1);
    noLeader.membership = null;
    expect(backupSource(noLeader, 100)).toMatchObject({ gate: 'leader-known' });
    const changing = cluster(3, 3, 1);
    changing.membership!.changeInFlight = true;
    expect(backupSource(changing, 100)).toMatchObject({ gate: 'no-change-in-flight' });
    const none = cluster(3, 3, 1);
    setMember(none, { ...member(2, true, 500) });
    setMember(none, { ...member(3, true, 500) });
    pod(none, 0).ready = false;
    expect(backupSource(none, 100)).toEqual({
      wait: "waiting for a voter to take the volume of: no follower is live and caught up, and the leader's pod 0 is not Ready",
      gate: 'backup-source-caught-up',
    });
  });
});

describe('the backups past keep', () => {
  const b = (name: string, phase: string | null, at: number) => ({ name, phase, at });
  it('keeps the newest ready ones, deletes older ready ones and failures older than the newest ready', () => {
    const list = [b('a', 'Ready', 1), b('b', 'Failed', 2), b('c', 'Ready', 3), b('d', 'Ready', 4), b('e', 'Failed', 5), b('f', 'Taking', 6)];
    expect(backupsPastKeep(list, 2).sort()).toEqual(['a', 'b']);
    expect(backupsPastKeep(list, 1).sort()).toEqual(['a', 'b', 'c']);
    expect(backupsPastKeep(list, 5)).toEqual(['b']);
  });
  it('deletes nothing while no backup is ready', () => {
    expect(backupsPastKeep([b('a', 'Failed', 1), b('b', 'Pending', 2)], 1)).toEqual([]);
  });
});

it('a backup is named after its cluster and the moment it began (UTC)', () => {
  expect(backupName('queen', new Date('2026-12-06T14:03:09.512Z'))).toBe('queen-20261206-140309');
});

it('a cluster restores while it names a backup and its recovery is not over', () => {
  const spec = { version: '2.6.0', secretName: 'q', bootstrap: { fromBackup: { name: 'queen-20261206-140309' } } };
  expect(restoring({ spec })).toBe(true);
  expect(restoring({ spec, status: { restore: { recoveredAt: '2026-12-06T14:10:00Z' } } })).toBe(false);
  expect(restoring({ spec: { version: '2.6.0', secretName: 'q' } })).toBe(false);
});
