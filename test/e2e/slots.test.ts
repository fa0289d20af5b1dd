// e2e `slots` (issue 33): a wait for a person holds no worker slot. One operator replica with 4
// slots (--max-concurrent-steps=4); six clusters' upgrades wait for approval, more than the slots;
// a seventh cluster's node replacement runs its steps at once meanwhile. Each waiting cluster's
// status still names its gate, no step of theirs runs, and approving one lets it go on.
import { afterAll, expect, it } from 'vitest';
import { ANNOTATIONS, type QueenCluster } from '../../crd/schema.ts';
import { annotate, clusterEvents, createCluster, getCluster, patchSpec, scenario, seedSpec, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { pendingSteps } from './temporal.ts';

let s: Scenario;
afterAll(() => s?.close());

const WAITING = ['a1', 'a2', 'a3', 'a4', 'a5', 'a6'];
const ready = (q: QueenCluster) => q.status?.phase === 'Ready' && q.status?.commits === true && !!q.status?.version;

it('slots: six upgrades wait for approval on a replica of four slots, and a replacement elsewhere runs at once', async () => {
  s = await scenario('slots');
  await s.install({ extra: ['--max-concurrent-steps=4'] }, { replicas: 1 });
  for (const name of WAITING) await createCluster(s, { ...seedSpec({ replicas: 1, minReadySeconds: 3 }), upgrade: { approval: 'Manual' } }, name);
  await createCluster(s, seedSpec({ minReadySeconds: 3 }), 'r');
  for (const name of [...WAITING, 'r']) await waitForCluster(s, `${name} Ready`, ready, 300_000, name);

  for (const name of WAITING) await patchSpec(s, { version: '2.6.1' }, name);
  for (const name of WAITING) {
    const held = await waitForCluster(s, `${name} waiting for approval`, (q) => q.status?.operation?.gate === 'approved' && !!q.status.operation.parked, 180_000, name);
    expect(held.status?.message).toBe(`waiting for approval to restart the leader (pod 0): kubectl -n ${s.ns} annotate queencluster ${name} ${ANNOTATIONS.approve}=2.6.1`);
    await waitFor(`no step of ${name} running while it waits`, async () => (await pendingSteps(s, `queencluster/${s.ns}/${name}`)).length === 0 || undefined, 10_000);
  }

  // Six waits, four slots: the replacement of a follower of r runs its steps at once.
  const r = await getCluster(s, 'r');
  const target = `r-${[2, 1, 0].find((o) => o !== r.status!.leader! - 1)}`;
  const asked = Date.now();
  await annotate(s, { [ANNOTATIONS.replacePod]: target }, 'r');
  const replaced = await waitForCluster(
    s,
    'the replacement done',
    (q) => q.status?.lastOperation?.type === 'ReplaceNode' && q.status.lastOperation.result === 'Succeeded' && q.status.phase === 'Ready',
    300_000,
    'r',
  );
  console.log(`the replacement of ${target} took ${Math.round((Date.now() - asked) / 1000)} s beside six waits for approval on four slots`);
  expect(replaced.status?.lastOperation?.message).toMatch(/is a voter again/);
  expect((await clusterEvents(s, 'r')).filter((e) => e.reason === 'ReplaceFinished')).toHaveLength(1);

  // They all still wait, and say so.
  for (const name of WAITING) {
    const q = await getCluster(s, name);
    expect(q.status?.operation?.gate).toBe('approved');
    expect(q.status?.phase).toBe('Upgrading');
  }

  // Approving one lets it go on; the others wait on.
  await annotate(s, { [ANNOTATIONS.approve]: '2.6.1' }, 'a1');
  await waitForCluster(s, 'a1 on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.lastOperation?.result === 'Succeeded' && q.status.phase === 'Ready', 240_000, 'a1');
  for (const name of WAITING.slice(1)) expect((await getCluster(s, name)).status?.operation?.gate).toBe('approved');
});
