// The broker's JWT mode (issue 12, item 5; queen-broker-api.md §0): with JWT_ENABLED=true the
// /api/v1/system/* routes need a bearer token with the Admin role, signed with JWT_SECRET (HS256).
// Without one they answer 401; a valid token without the role, 403. /health and the KV probe
// stay open; the raft port keeps its own token.
import { createHmac } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { dumpLogsIfFailed, SimCluster, statusOf } from './harness.ts';

let cluster: SimCluster | null = null;
afterEach(async (ctx) => {
  dumpLogsIfFailed(ctx, cluster);
  await cluster?.close();
  cluster = null;
});

const SECRET = 'jwt-secret-of-the-test';

export function signJwt(claims: Record<string, unknown>, secret = SECRET): string {
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const head = enc({ alg: 'HS256', typ: 'JWT' });
  const body = enc(claims);
  const sig = createHmac('sha256', secret).update(`${head}.${body}`).digest('base64url');
  return `${head}.${body}.${sig}`;
}

async function get(c: SimCluster, id: number, path: string, token?: string) {
  const res = await fetch(`http://${c.ip(id)}:6632${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(5000) });
  return { status: res.status, json: (await res.json()) as any };
}

describe('JWT_ENABLED', () => {
  it('system routes need an Admin token: 401 without or with a bad one, 403 without the role; health and KV stay open', async () => {
    const c = (cluster = new SimCluster({ env: { JWT_ENABLED: 'true', JWT_SECRET: SECRET } }));
    c.startAll();
    const L = (await c.waitLeader()).id;
    await c.waitHealthy([1, 2, 3]);
    const F = [1, 2, 3].find((id) => id !== L)!;
    const M = '/api/v1/system/raft/membership';
    const now = Math.floor(Date.now() / 1000);

    const none = await get(c, F, M);
    expect(none.status).toBe(401);
    expect(none.json.code).toBe('unauthorized');
    expect((await get(c, F, M, signJwt({ role: 'admin', exp: now + 60 }, 'another-secret'))).status).toBe(401);
    expect((await get(c, F, M, signJwt({ role: 'admin', exp: now - 10 }))).json.error).toMatch(/expired/);
    const reader = await get(c, F, M, signJwt({ role: 'read-write', exp: now + 60 }));
    expect(reader.status).toBe(403);
    expect(reader.json.code).toBe('forbidden');

    const admin = signJwt({ sub: 'queen-operator', roles: ['Admin'], exp: now + 60 });
    const ok = await get(c, F, M, admin);
    expect(ok.status).toBe(200);
    expect(ok.json.membership.voters).toEqual([1, 2, 3]);
    // A change through a follower: it goes to the leader over the raft port with the raft token.
    const del = await fetch(`http://${c.ip(F)}:6632${M}/members/9`, { method: 'DELETE', headers: { authorization: `Bearer ${admin}` } });
    expect(del.status).toBe(200);
    const denied = await fetch(`http://${c.ip(F)}:6632${M}/members/9`, { method: 'DELETE' });
    expect(denied.status).toBe(401);

    expect(statusOf(await c.health(F))).toBe(200);
    expect(statusOf(await c.put(F, 'probe', 1))).toBe(200);
  });

  it('JWT_ENABLED without JWT_SECRET refuses to boot', async () => {
    const c = (cluster = new SimCluster({ size: 1, env: { JWT_ENABLED: 'true' } }));
    c.start(1);
    expect(await c.waitExit(1)).toBe(1);
    expect(c.node(1).hasLog(/JWT_ENABLED=true needs JWT_SECRET/)).toBe(true);
  });
});
