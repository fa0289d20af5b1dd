// e2e `credentials` (issue 12, item 5): brokers run with JWT_ENABLED=true answer 401 on their
// system routes without an Admin token. The operator says so in status; told where the token is
// (spec.adminTokenSecret), it says when it may not read that Secret; granted get on that one
// Secret (a Role with resourceNames, as the README shows), it forms the cluster; a token the
// brokers refuse later (expired, or without the Admin role) is Blocked with the brokers' words.
import { createHmac } from 'node:crypto';
import { afterEach, expect, it } from 'vitest';
import { createCluster, getCluster, kubectl, patchSpec, scenario, seedSpec, waitForCluster, type Scenario } from './harness.ts';
import { lookAgainTimers, operationHistory } from './temporal.ts';

let s: Scenario | null = null;
afterEach(async () => {
  await s?.close();
  s = null;
});

const JWT_SECRET = 'the-brokers-jwt-signing-key';

function jwt(claims: Record<string, unknown>): string {
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const head = enc({ alg: 'HS256', typ: 'JWT' });
  const body = enc(claims);
  return `${head}.${body}.${createHmac('sha256', JWT_SECRET).update(`${head}.${body}`).digest('base64url')}`;
}

async function setToken(sc: Scenario, token: string) {
  await sc.core
    .replaceNamespacedSecret({ namespace: sc.ns, name: 'queen-admin', body: { metadata: { name: 'queen-admin' }, stringData: { token } } })
    .catch(async () => sc.core.createNamespacedSecret({ namespace: sc.ns, body: { metadata: { name: 'queen-admin' }, stringData: { token } } }));
}

it('credentials: an Admin token from the one Secret the operator may read; a token the brokers refuse is said in status', async () => {
  s = await scenario('creds');
  // The brokers' signing key, in the cluster's Secret.
  expect((await kubectl(['-n', s.ns, 'patch', 'secret', 'queen', '-p', JSON.stringify({ stringData: { JWT_SECRET } })])).code).toBe(0);
  await s.install();
  const spec = seedSpec({
    env: [
      { name: 'JWT_ENABLED', value: 'true' },
      { name: 'JWT_SECRET', valueFrom: { secretKeyRef: { name: 'queen', key: 'JWT_SECRET' } } },
    ],
  });
  await createCluster(s, spec);
  // No token: the brokers refuse the membership API, and the status says what to set.
  const noToken = await waitForCluster(s, 'Blocked without a token', (q) => q.status?.phase === 'Blocked' && /Admin token/.test(q.status?.message ?? ''), 180_000);
  expect(noToken.status?.message).toBe(
    'the brokers ask for an Admin token on their membership API (401: this route needs a bearer token with the Admin role (JWT_ENABLED=true)): set spec.adminTokenSecret to a Secret key that holds one',
  );

  // Told where it is, but not allowed to read it.
  const exp = Math.floor(Date.now() / 1000) + 3600;
  await setToken(s, jwt({ sub: 'queen-operator', role: 'admin', exp }));
  await patchSpec(s, { adminTokenSecret: { name: 'queen-admin', key: 'token' } });
  const forbidden = await waitForCluster(s, 'Blocked: may not read the Secret', (q) => /may not read the Secret queen-admin/.test(q.status?.message ?? ''), 120_000);
  expect(forbidden.status?.message).toBe(
    'the operator may not read the Secret queen-admin (spec.adminTokenSecret): grant its ServiceAccount get on that one Secret, as the README shows',
  );

  // Granted get on that one Secret, as the README says: the cluster forms.
  expect((await kubectl(['-n', s.ns, 'create', 'role', 'queen-admin-token', '--verb=get', '--resource=secrets', '--resource-name=queen-admin'])).code).toBe(0);
  expect((await kubectl(['-n', s.ns, 'create', 'rolebinding', 'queen-operator-admin-token', '--role=queen-admin-token', `--serviceaccount=${s.ns}:queen-operator`])).code).toBe(0);
  // (The operator may still not list or watch Secrets, nor read another one.)
  const canList = await kubectl(['-n', s.ns, 'auth', 'can-i', 'list', 'secrets', `--as=system:serviceaccount:${s.ns}:queen-operator`]);
  expect(canList.stdout.trim()).toBe('no');
  const canGetOther = await kubectl(['-n', s.ns, 'auth', 'can-i', 'get', 'secret/queen', `--as=system:serviceaccount:${s.ns}:queen-operator`]);
  expect(canGetOther.stdout.trim()).toBe('no');
  const ready = await waitForCluster(s, 'Ready with the token', (q) => q.status?.phase === 'Ready' && q.status?.commits === true && JSON.stringify(q.status?.voters) === '[1,2,3]', 240_000).catch(
    async (err: unknown) => {
      // Which operation holds the phase, at which step, parked how and since when (a wait that does not look again).
      // In the error itself, which is what a CI log keeps of a failure.
      const q = await getCluster(s!);
      const parked = s!.operatorLog().split('\n').filter((l) => /parked|look again|Secret|credentials/.test(l)).slice(-15);
      const history = await operationHistory(s!).catch((e: unknown) => [`no history: ${String(e)}`]);
      throw new Error(
        [
          String(err instanceof Error ? err.message : err),
          `status.operation ${JSON.stringify(q.status?.operation ?? null)}`,
          `lastOperation ${JSON.stringify(q.status?.lastOperation ?? null)}`,
          'the operation\'s history:',
          ...history.slice(-40),
          'the operator\'s lines on parking and credentials:',
          ...parked.map((l) => l.slice(0, 400)),
        ].join('\n'),
      );
    },
  );
  expect(ready.status?.members?.every((m) => m.live)).toBe(true);
  // The formation parked on each hold and looked again on its timer: 30 s after a hold first
  // showed, doubling only after a timer fired (a look the watcher woke, the pods starting, does not
  // put the next one off), so the grant was seen within 30 s.
  const formed = ready.status?.lastOperation;
  expect(formed).toMatchObject({ type: 'FormCluster', result: 'Succeeded' });
  const timers = await lookAgainTimers(s, { workflowId: formed!.workflowId!, runId: formed!.runId! });
  expect(timers.map((t) => t.gate)).toContain('broker-credentials');
  expect(timers.some((t) => /may not read the Secret queen-admin/.test(t.message))).toBe(true);
  for (const t of timers) expect(t.seconds, JSON.stringify(t)).toBe(Math.min(30 * 2 ** t.firedBefore, 300));

  // The token expires (it is put back expired): Blocked with the brokers' words, once read again.
  await setToken(s, jwt({ sub: 'queen-operator', role: 'admin', exp: Math.floor(Date.now() / 1000) - 10 }));
  const expired = await waitForCluster(s, 'Blocked: the token refused', (q) => q.status?.phase === 'Blocked' && /refuse the Admin token/.test(q.status?.message ?? ''), 120_000);
  expect(expired.status?.message).toBe('the brokers refuse the Admin token of Secret queen-admin, key token (401: the token has expired): put a valid token with the Admin role there');
  // A token without the Admin role.
  await setToken(s, jwt({ sub: 'queen-operator', role: 'read-write', exp }));
  const noRole = await waitForCluster(s, 'Blocked: no Admin role', (q) => /403: this route needs the Admin role/.test(q.status?.message ?? ''), 120_000);
  expect(noRole.status?.phase).toBe('Blocked');
  // A good one again: Ready.
  await setToken(s, jwt({ sub: 'queen-operator', role: 'admin', exp }));
  await waitForCluster(s, 'Ready again', (q) => q.status?.phase === 'Ready', 120_000);
});
