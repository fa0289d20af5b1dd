// e2e `long-call` (issue 8, item 7): a step whose single call outlasts the heartbeat timeout is
// not started a second time beside itself. The voters go from 3 to 5 while two of the three have
// stopped (held by the test bed): the leader still answers, so the operator adds node 4 as a
// learner, and the broker holds that change until its deadline (30 s), since nothing commits.
// The step heartbeats while it waits for the answer: Temporal never times it out, its attempt
// stays the first, and status says what the broker answered. Once the two voters are back, the
// scale goes on to five voters.
// A quick step has a heartbeat timeout too: an admission webhook that answers after 8 s (and is
// then ignored) makes the upgrade's first step, applying the pod template, slow; the process of the
// replica running it is killed. The other replica retries the step once its heartbeats stop: the
// failure Temporal records is a heartbeat timeout, seen before the step's 2-minute start-to-close
// would have run out.
// And a quick step that is running when its replica is told to stop (SIGTERM) finishes there, within
// the shutdown grace: one attempt, completed by that replica after it was told.
import { createServer, type Server } from 'node:net';
import { unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { temporal as proto } from '@temporalio/proto';
import { control } from '../testbed/client.ts';
import { formed, kubectl, monitor, patchSpec, scenario, seedSpec, sleep, testbed, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { parseIdentity } from '../../identity.ts';
import { eventTimeMs, historyEvents, settledRuns } from './temporal.ts';

let s: Scenario | null = null;
let silent: Server | null = null;
let webhookFile: string | null = null;
afterEach(async () => {
  if (webhookFile) {
    await kubectl(['delete', '--ignore-not-found', '-f', webhookFile]);
    unlinkSync(webhookFile);
    webhookFile = null;
  }
  silent?.close();
  silent = null;
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

  const watch = await monitor(s);
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

/**
 * An upgrade whose first step, applying the pod template, is slow: a webhook that never answers (it
 * takes the connection and says nothing), ignored after `seconds`, holds every update of the
 * StatefulSet (the step makes two). Returns the step as Temporal has it once a replica runs it.
 */
async function slowFirstStep(sc: Scenario, seconds: number): Promise<{ pod: string; started: number }> {
  silent = createServer(() => undefined);
  await new Promise<void>((resolve) => silent!.listen(0, '127.0.0.1', resolve));
  const port = (silent.address() as { port: number }).port;
  webhookFile = join(testbed().dir, `slow-webhook-${sc.ns}.yaml`);
  writeFileSync(
    webhookFile,
    `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: { name: slow-${sc.ns} }
webhooks:
  - name: slow.test.queenmq.com
    clientConfig: { url: "https://127.0.0.1:${port}/validate" }
    rules: [{ apiGroups: ["apps"], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["statefulsets"] }]
    namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: ${sc.ns} } }
    failurePolicy: Ignore
    sideEffects: None
    admissionReviewVersions: ["v1"]
    timeoutSeconds: ${seconds}
`,
  );
  const applied = await kubectl(['apply', '-f', webhookFile]);
  expect(applied.code, applied.stderr).toBe(0);
  await sleep(2000);
  await patchSpec(sc, { version: '2.6.1' });
  return waitFor(
    'a replica applying the pod template',
    async () => {
      const d = await sc.temporal.workflow.getHandle(`queencluster/${sc.ns}/queen`).describe();
      const a = (d.raw.pendingActivities ?? []).find((x) => x.activityType?.name === 'applyPodTemplate');
      const worker = parseIdentity(a?.lastWorkerIdentity ?? '');
      if (!a || a.state !== proto.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED || !worker) return undefined;
      return { pod: worker.host, started: eventTimeMs(a.lastStartedTime) };
    },
    60_000,
  );
}

it('long-call: a quick step whose replica dies is retried once its heartbeats stop, before its start-to-close timeout', async () => {
  s = await scenario('quickcrash');
  await s.install({}, { replicas: 2 });
  await formed(s, seedSpec());
  const id = `queencluster/${s.ns}/queen`;
  const step = await slowFirstStep(s, 8);
  // Its process killed (and kept down): it sends no heartbeat and no answer.
  await control.kill(s.ns, step.pod, { signal: 'SIGKILL', hold: true });
  // The next attempt of the same step, on the other replica, after the 20 s heartbeat timeout:
  // looked for only until the first attempt's 2-minute start-to-close timeout would have run out.
  const startToClose = step.started + 120_000;
  const retried = await waitFor(
    'the step retried',
    async () => {
      const d = await s!.temporal.workflow.getHandle(id).describe();
      const a = (d.raw.pendingActivities ?? []).find((x) => x.activityType?.name === 'applyPodTemplate');
      if (a && (a.attempt ?? 1) > 1) return a;
      // Done already: the next attempt ran to its end before this looked.
      const done = (await historyEvents(s!, { workflowId: id, runId: d.runId })).find((e) => e.activityTaskStartedEventAttributes && (e.activityTaskStartedEventAttributes.attempt ?? 1) > 1);
      return done ? { attempt: done.activityTaskStartedEventAttributes!.attempt, lastFailure: done.activityTaskStartedEventAttributes!.lastFailure } : undefined;
    },
    Math.max(0, startToClose - 5000 - Date.now()),
  );
  console.log(`long-call: attempt ${retried.attempt} ${Math.round((Date.now() - step.started) / 1000)} s after the first began, after: ${retried.lastFailure?.message}`);
  expect(retried.lastFailure?.timeoutFailureInfo?.timeoutType).toBe(proto.api.enums.v1.TimeoutType.TIMEOUT_TYPE_HEARTBEAT);
  await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready', 300_000);
});

it('long-call: a quick step running when its replica is told to stop finishes within the shutdown grace', async () => {
  s = await scenario('quickgrace');
  await s.install({}, { replicas: 2 });
  await formed(s, seedSpec());
  const id = `queencluster/${s.ns}/queen`;
  // Two updates of 5 s each: the step needs about 10 s of the 20 s.
  const step = await slowFirstStep(s, 5);
  // SIGTERM (a pod deleted as a rollout or a drain deletes it): no new work, running steps have
  // --shutdown-grace (20 s) to finish, and this one needs what is left of its 10 s.
  const told = Date.now();
  const del = await kubectl(['-n', s.ns, 'delete', 'pod', step.pod, '--wait=false']);
  expect(del.code, del.stderr).toBe(0);
  await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready', 300_000);
  // The step's one attempt ran to its end on the replica told to stop, after it was told.
  const run = (await settledRuns(s, id)).find((r) => r.type === 'rollingUpgrade')!;
  const events = await historyEvents(s, run);
  const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'applyPodTemplate')!;
  const started = events.filter((e) => e.activityTaskStartedEventAttributes?.scheduledEventId?.toString() === scheduled.eventId?.toString());
  const ended = events.filter((e) => e.activityTaskCompletedEventAttributes?.scheduledEventId?.toString() === scheduled.eventId?.toString());
  expect(started.map((e) => e.activityTaskStartedEventAttributes!.attempt)).toEqual([1]);
  expect(ended).toHaveLength(1);
  expect(parseIdentity(ended[0]!.activityTaskCompletedEventAttributes!.identity ?? '')?.host).toBe(step.pod);
  const endedAt = eventTimeMs(ended[0]!.eventTime);
  console.log(`long-call: the step ended ${((endedAt - told) / 1000).toFixed(1)} s after SIGTERM (grace 20 s), ${((endedAt - step.started) / 1000).toFixed(1)} s after it began`);
  expect(endedAt).toBeGreaterThan(told);
  expect(endedAt - told).toBeLessThan(20_000);
  expect(s.operatorLog()).toMatch(/SIGTERM: taking no new work; running steps have 20s to finish/);
});
