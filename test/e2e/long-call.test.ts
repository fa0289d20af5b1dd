// e2e `long-call` (issue 8, item 7): a step whose single call outlasts the heartbeat timeout is
// not started a second time beside itself. The voters go from 3 to 5 while two of the three have
// stopped (held by the test bed): the leader still answers, so the operator adds node 4 as a
// learner, and the broker holds that change until its deadline (30 s), since nothing commits.
// The step heartbeats while it waits for the answer: Temporal never times it out, its attempt
// stays the first, and status says what the broker answered. Once the two voters are back, the
// scale goes on to five voters.
import { afterEach, expect, it } from 'vitest';
import { temporal as proto } from '@temporalio/proto';
import { control } from '../testbed/client.ts';
import { formed, monitor, patchSpec, scenario, seedSpec, sleep, waitFor, waitForCluster, type Scenario } from './harness.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

/** The pending addLearnerNode activity of the scale, as Temporal sees it. */
async function addLearnerStep(sc: Scenario) {
  const d = await sc.temporal.workflow.getHandle(`queencluster/${sc.ns}/queen`).describe();
  return (d.raw.pendingActivities ?? []).find((a) => a.activityType?.name === 'addLearnerNode') ?? null;
}

it('long-call: a membership change held 30 s by the broker is one attempt, heartbeating, never timed out', async () => {
  s = await scenario('longcall');
  const qc = await formed(s, seedSpec());
  const leader = qc.status!.leader!;
  const followers = [1, 2, 3].filter((id) => id !== leader);
  for (const id of followers) await control.kill(s.ns, `queen-${id - 1}`, { hold: true });

  const watch = monitor(s);
  await patchSpec(s, { replicas: 5 });
  await waitFor('the step adding node 4 running', async () => (await addLearnerStep(s!))?.state === proto.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED, 120_000);
  // Through two heartbeat timeouts (30 s each) of the broker's 30 s deadline and what follows.
  const seen: string[] = [];
  const until = Date.now() + 65_000;
  while (Date.now() < until) {
    const a = await addLearnerStep(s);
    if (a) {
      seen.push(`attempt ${a.attempt} ${a.lastFailure?.message ?? ''}`.trim());
      expect(a.attempt, seen.join('\n')).toBe(1);
      expect(a.lastFailure ?? null, seen.join('\n')).toBeNull();
    }
    await sleep(1000);
  }
  // The broker's answer came back to the waiting step, and status said it.
  await watch.stop();
  expect(watch.messages.filter((m) => /^adding node 4 as a learner: the leader answered "(busy|timeout)"/.test(m)), watch.timeline.join('\n')).not.toEqual([]);

  for (const id of followers) await control.release(s.ns, `queen-${id - 1}`);
  const done = await waitForCluster(s, 'five voters', (q) => JSON.stringify(q.status?.voters) === '[1,2,3,4,5]' && q.status?.phase === 'Ready', 300_000);
  expect(done.status?.lastOperation).toMatchObject({ type: 'ScaleVoters', result: 'Succeeded' });
});
