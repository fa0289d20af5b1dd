// e2e `long-call` (issue 8, item 7): a step whose single call outlasts the heartbeat timeout is
// not started a second time beside itself. The voters go from 3 to 5 while two of the three have
// stopped (held by the test bed): the leader still answers, so the operator adds node 4 as a
// learner, and the broker holds that change until its deadline (30 s), since nothing commits.
// The step heartbeats while it waits for the answer: Temporal never times it out, its attempt
// stays the first, and status says what the broker answered. Once the two voters are back, the
// scale goes on to five voters.
// A quick step has a heartbeat timeout too: an admission webhook that answers after 8 s (and is
// then ignored) makes the upgrade's first step, applying the pod template, slow; the replica running
// it is deleted by force. The other replica retries the step once its heartbeats stop (the failure
// Temporal records is a heartbeat timeout), not after the step's 2-minute start-to-close.
import { createServer, type Server } from 'node:net';
import { unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { temporal as proto } from '@temporalio/proto';
import { control } from '../testbed/client.ts';
import { formed, kubectl, monitor, patchSpec, scenario, seedSpec, sleep, testbed, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { currentStep } from './temporal.ts';

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

it('long-call: a quick step whose replica dies is retried once its heartbeats stop', async () => {
  s = await scenario('quickcrash');
  await s.install({}, { replicas: 2 });
  await formed(s, seedSpec());
  // A webhook that never answers (it takes the connection and says nothing), ignored after 8 s.
  silent = createServer(() => undefined);
  await new Promise<void>((resolve) => silent!.listen(0, '127.0.0.1', resolve));
  const port = (silent.address() as { port: number }).port;
  webhookFile = join(testbed().dir, `slow-webhook-${s.ns}.yaml`);
  writeFileSync(
    webhookFile,
    `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: { name: slow-${s.ns} }
webhooks:
  - name: slow.test.queenmq.com
    clientConfig: { url: "https://127.0.0.1:${port}/validate" }
    rules: [{ apiGroups: ["apps"], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["statefulsets"] }]
    namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: ${s.ns} } }
    failurePolicy: Ignore
    sideEffects: None
    admissionReviewVersions: ["v1"]
    timeoutSeconds: 8
`,
  );
  const applied = await kubectl(['apply', '-f', webhookFile]);
  expect(applied.code, applied.stderr).toBe(0);
  await sleep(2000);

  const id = `queencluster/${s.ns}/queen`;
  await patchSpec(s, { version: '2.6.1' });
  const step = await waitFor('the replica applying the pod template', async () => {
    const c = await currentStep(s!, id);
    return c?.activity === 'applyPodTemplate' ? c : undefined;
  }, 60_000);
  const del = await kubectl(['-n', s.ns, 'delete', 'pod', step.pod, '--grace-period=0', '--force']);
  expect(del.code).toBe(0);
  // The next attempt of the same step, on the other replica, after a heartbeat timeout.
  const retried = await waitFor(
    'the step retried',
    async () => {
      const d = await s!.temporal.workflow.getHandle(id).describe();
      const a = (d.raw.pendingActivities ?? []).find((x) => x.activityType?.name === 'applyPodTemplate');
      return a && (a.attempt ?? 1) > 1 ? a : undefined;
    },
    150_000,
  );
  // The deleted replica stops heartbeating (its process is killed), or, if it still runs when the
  // webhook lets its call through, is refused by the API server: a ServiceAccount token bound to
  // a pod dies with the pod. Either way the next attempt does not wait out the step's timeout.
  console.log(`long-call: attempt ${retried.attempt} after: ${retried.lastFailure?.message}`);
  expect(retried.lastFailure?.message).toMatch(/heartbeat timeout|^applying the new pod template: the API server refuses our credentials \(401\)/i);
  await waitForCluster(s, 'every pod on 2.6.1', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready', 300_000);
});
