// e2e `step-failing` (issue 8, item 8): a step that keeps failing is not retried in silence.
// - An admission webhook that is down (failurePolicy Fail, nothing listening): every update of the
//   StatefulSet answers 500. The upgrade's step retries, and from its third attempt status.message
//   and a Warning Event say the step and the API server's words; once the webhook is gone the
//   upgrade goes on and finishes.
// - An admission policy that refuses every update of the StatefulSet (a ValidatingAdmissionPolicy,
//   as a cluster's change freeze would be): a 4xx no retry can change. The step ends at once and
//   the cluster shows Blocked with the API server's message and how to resume; nothing restarts
//   and nothing starts again by itself. With the policy gone, a retry finishes the upgrade.
import { unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { annotate, clusterEvents, formed, freezeStatefulSets, getCluster, kubectl, patchSpec, scenario, seedSpec, sleep, testbed, waitFor, waitForCluster, type Scenario } from './harness.ts';
import { workflowRuns } from './temporal.ts';

let s: Scenario | null = null;
const applied: string[] = [];
afterEach(async () => {
  for (const f of applied.splice(0)) {
    await kubectl(['delete', '--ignore-not-found', '-f', f]);
    unlinkSync(f);
  }
  await s?.close();
  s = null;
});

async function apply(name: string, yaml: string): Promise<string> {
  const file = join(testbed().dir, `${name}.yaml`);
  writeFileSync(file, yaml);
  applied.push(file);
  const r = await kubectl(['apply', '-f', file]);
  expect(r.code, r.stderr).toBe(0);
  return file;
}

async function remove(file: string) {
  const r = await kubectl(['delete', '-f', file]);
  expect(r.code, r.stderr).toBe(0);
  applied.splice(applied.indexOf(file), 1);
  unlinkSync(file);
}

const statefulSetUpdates = `[{ apiGroups: ["apps"], apiVersions: ["v1"], operations: ["UPDATE"], resources: ["statefulsets"] }]`;

it('step-failing: a webhook that is down is told in status and an Event; a policy that refuses is Blocked with its words', async () => {
  s = await scenario('stepfail');
  await formed(s, seedSpec());
  const ns = s.ns;

  const webhook = await apply(
    `webhook-${ns}`,
    `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: { name: broken-${ns} }
webhooks:
  - name: broken.test.queenmq.com
    clientConfig: { url: "https://127.0.0.1:1/validate" }
    rules: ${statefulSetUpdates}
    namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: ${ns} } }
    failurePolicy: Fail
    sideEffects: None
    admissionReviewVersions: ["v1"]
    timeoutSeconds: 2
`,
  );
  await patchSpec(s, { version: '2.6.1' });
  const failing = await waitForCluster(s, 'the failing step told', (q) => /^applying the new pod template: attempt \d+ failed: /.test(q.status?.message ?? ''), 120_000);
  expect(failing.status?.message).toMatch(/^applying the new pod template: attempt \d+ failed: the API server answered 500: .*failed calling webhook "broken\.test\.queenmq\.com".*; trying again$/);
  expect(failing.status?.operation).toMatchObject({ type: 'RollingUpgrade', step: 'applying the new pod template' });
  // The Event is posted right after the status line.
  await waitFor('the StepFailing Event', async () => (await clusterEvents(s!)).some((e) => e.reason === 'StepFailing'), 30_000);
  const told = (await clusterEvents(s)).filter((e) => e.reason === 'StepFailing');
  expect(told.map((e) => e.type)).toEqual(['Warning']);
  expect(told[0]!.message).toMatch(/^applying the new pod template: attempt 3 failed: the API server answered 500: /);
  await remove(webhook);
  await waitForCluster(s, 'the upgrade done', (q) => q.status?.version === '2.6.1' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded', 300_000);

  const lift = await freezeStatefulSets(s);
  const restartsBefore = (await clusterEvents(s)).filter((e) => e.reason === 'RestartPod').length;
  await patchSpec(s, { version: '2.6.2' });
  const blocked = await waitForCluster(s, 'Blocked', (q) => q.status?.phase === 'Blocked' && q.status?.lastOperation?.target === '2.6.2', 120_000);
  expect(blocked.status?.lastOperation?.result).toBe('Failed');
  expect(blocked.status?.message).toMatch(
    new RegExp(
      `^the upgrade to 2\\.6\\.2 failed: applying the new pod template: the API server refused it \\(403\\): statefulsets\\.apps "queen" is forbidden: ` +
        `ValidatingAdmissionPolicy 'freeze-${ns}' with binding 'freeze-${ns}' denied request: StatefulSets are frozen by the change policy; ` +
        `to resume: kubectl -n ${ns} annotate queencluster queen queenmq\\.com/retry=\\$\\(date \\+%s\\) --overwrite$`,
    ),
  );
  // It ended at once (no attempt after the refusal) and nothing starts again by itself.
  await sleep(10_000);
  const runs = await workflowRuns(s, `queencluster/${ns}/queen`);
  expect(runs.filter((r) => r.type === 'rollingUpgrade').map((r) => r.status)).toEqual(['COMPLETED', 'FAILED']);
  expect((await clusterEvents(s)).filter((e) => e.reason === 'RestartPod')).toHaveLength(restartsBefore);

  await lift();
  await annotate(s, { 'queenmq.com/retry': '1' });
  const done = await waitForCluster(s, 'the upgrade done', (q) => q.status?.version === '2.6.2' && q.status?.phase === 'Ready' && q.status?.lastOperation?.result === 'Succeeded', 300_000);
  expect(done.status?.lastOperation?.retryToken).toBe('1');
  expect((await getCluster(s)).status?.operation ?? null).toBeNull();
});
