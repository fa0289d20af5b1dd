// The broker client against a local HTTP server that answers as a Queen node does
// (shared/reference/queen-broker-api.md): health whatever the status, the leader's view,
// refusals with their codes, the write probe.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addLearner,
  classifyRefusal,
  freshestView,
  probeWrite,
  setVoters,
  promote,
  readHealth,
  readMembership,
  readMembershipAnswer,
  removeMember,
  type ChangeResult,
} from '../../activities/broker.ts';
import { refusedWords } from '../../activities/credentials.ts';

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;
let server: Server;
let base = '';
let handler: Handler = (_req, _body, res) => res.writeHead(404).end();
const seen: { method: string; url: string; body: string }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, body });
      handler(req, body, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const answer = (status: number, json: unknown): Handler => (_req, _body, res) => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
};

const follower = {
  status: 'healthy', engine: 'raft', version: '2.0.3',
  raft: { role: 'follower', leader: true, term: 1, applied: 23, commit: 23, lag: 0, quorumAckMs: 186, storageReady: true, clusterVersion: 4, kinds: 4, apply: { failure: null, skipped: [] } },
};
const noQuorum = { ...follower, status: 'settling', raft: { ...follower.raft, role: 'leader', quorumAckMs: 8417 } };
const old202 = { status: 'healthy', engine: 'raft', version: '2.0.2', raft: { role: 'leader', leader: true, term: 2, applied: 9, commit: 9, lag: 0 } };
const poisoned = { ...follower, status: 'settling', raft: { ...follower.raft, role: 'stopped', leader: false, quorumAckMs: undefined, apply: { failure: { index: 1159, term: 3, digest: 'ab12' }, skipped: [] } } };

const view = {
  engine: 'raft',
  membership: {
    nodeId: 3, source: 'leader', viewAgeMs: 0, leader: 3, term: 4, voters: [1, 2, 3], learners: [4], joint: null,
    membershipIndex: 30, membershipCommitted: true, changeInFlight: false, lastLogIndex: 1055, committedIndex: 1055,
    liveWithinMs: 2000, promoteMaxLag: 1000,
    members: [
      { nodeId: 1, voter: true, raft: 'queen-0.h:7400', http: 'queen-0.h:6632', matched: 721, lag: 334, lastAckMs: 50, live: true },
      { nodeId: 2, voter: true, raft: 'queen-1.h:7400', http: 'queen-1.h:6632', matched: 1055, lag: 0, lastAckMs: 40, live: true },
      { nodeId: 3, voter: true, raft: 'queen-2.h:7400', http: 'queen-2.h:6632', matched: 1055, lag: 0, lastAckMs: 0, live: true },
      { nodeId: 4, voter: false, raft: 'queen-3.h:7400', http: 'queen-3.h:6632', matched: null, lag: null, lastAckMs: null, live: false },
    ],
  },
};

describe('health is read whatever the status (C1)', () => {
  it.each([
    ['a follower', 200, follower, { healthy: true, role: 'follower', quorumAckMs: 186, applyFailure: null, version: '2.0.3' }],
    ['a leader without quorum (503 settling)', 503, noQuorum, { healthy: false, role: 'leader', quorumAckMs: 8417, applyFailure: null }],
    ['a 2.0.2 node without quorumAckMs or apply block', 200, old202, { healthy: true, role: 'leader', quorumAckMs: null, applyFailure: null }],
    ['a node whose apply stopped', 503, poisoned, { healthy: false, role: 'stopped', applyFailure: { index: 1159, term: 3, digest: 'ab12' } }],
  ])('%s', async (_name, status, body, expected) => {
    handler = answer(status, body);
    expect(await readHealth(base)).toMatchObject(expected);
  });
  it('a body without raft.role, or no answer, is no health', async () => {
    handler = answer(503, { error: 'x' });
    expect(await readHealth(base)).toBeNull();
    handler = () => undefined; // never answers
    expect(await readHealth(base, 300)).toBeNull();
    expect(await readHealth('http://127.0.0.1:1', 300)).toBeNull();
  });
});

describe('the membership is the leader view (C2)', () => {
  it('parses voters, learners, lag and liveness', async () => {
    handler = answer(200, view);
    const m = await readMembership(base);
    expect(m).toMatchObject({ source: 'leader', leader: 3, voters: [1, 2, 3], learners: [4], promoteMaxLag: 1000 });
    expect(m!.members.find((x) => x.nodeId === 1)).toMatchObject({ live: true, lag: 334, matched: 721 });
    expect(m!.members.find((x) => x.nodeId === 4)).toMatchObject({ lag: null, live: false, voter: false });
  });
  it('the freshest view wins: the higher term, then the membership index, then the leader own view', () => {
    const v = (term: number, idx: number, source: string) => ({ view: { ...(view.membership as never as object), term, membershipIndex: idx, source } as never, via: term });
    expect(freshestView([v(4, 30, 'follower'), v(5, 1, 'follower'), v(4, 31, 'leader')])?.via).toBe(5);
    expect(freshestView([v(4, 30, 'follower'), v(4, 30, 'leader')])?.view).toMatchObject({ source: 'leader' });
  });
});

describe('a change the leader refuses carries its code (C3, G7)', () => {
  it('add learner sends the documented body and returns the membership', async () => {
    handler = answer(200, { engine: 'raft', ok: true, membership: { ...view.membership, learners: [4] } });
    const r = await addLearner(base, { id: 4, raft: 'queen-3.h:7400', http: 'queen-3.h:6632' });
    expect(r.ok && r.membership.learners).toEqual([4]);
    const sent = seen.at(-1)!;
    expect(sent).toMatchObject({ method: 'POST', url: '/api/v1/system/raft/membership/learners' });
    expect(JSON.parse(sent.body)).toEqual({ id: 4, raft: 'queen-3.h:7400', http: 'queen-3.h:6632' });
  });
  it.each<[string, () => Promise<ChangeResult>, number, string, 'transient' | 'permanent']>([
    ['promote behind', () => promote(base, [4]), 409, 'learner_behind', 'transient'],
    ['remove without quorum', () => removeMember(base, 5), 409, 'no_quorum', 'transient'],
    ['remove the last voter', () => removeMember(base, 1), 409, 'last_voter', 'permanent'],
    ['add with other addresses', () => addLearner(base, { id: 4, raft: 'x:1', http: 'x:2' }), 409, 'address_mismatch', 'permanent'],
    ['a tenant header', () => promote(base, [4]), 403, 'forbidden', 'permanent'],
    ['an election', () => promote(base, [4]), 503, 'retry', 'transient'],
  ])('%s: %s', async (_name, call, status, code, kind) => {
    handler = answer(status, { ok: false, code, error: 'what to do' });
    expect(await call()).toEqual({ ok: false, code, kind, status, error: 'what to do' });
  });
  it('DELETE goes to members/<id>; a plain transport error has no code', async () => {
    handler = answer(200, view);
    await removeMember(base, 5);
    expect(seen.at(-1)).toMatchObject({ method: 'DELETE', url: '/api/v1/system/raft/membership/members/5' });
    const r = await removeMember('http://127.0.0.1:1', 5);
    expect(r).toMatchObject({ ok: false, code: null, kind: 'transient', error: 'connection refused' });
  });
  it('classifies every documented code', () => {
    for (const c of ['in_flight', 'no_quorum', 'learner_behind', 'membership_changed', 'leader_changed', 'busy', 'timeout', 'leader_unreachable', 'retry', 'kinds_unknown']) {
      expect(classifyRefusal(c)).toBe('transient');
    }
    for (const c of ['address_mismatch', 'forbidden', 'bad_request', 'last_voter', 'kinds_behind', 'already_voter', 'not_a_learner', 'not_a_member', 'membership_invalid', 'unsupported']) {
      expect(classifyRefusal(c)).toBe('permanent');
    }
  });
});

describe('the probe proves a write committed (C4)', () => {
  it('200 with applied true is a commit, sent with a TTL', async () => {
    handler = answer(200, { applied: true, index: 0, key: 'probe', op: 'put', version: 1 });
    expect(await probeWrite(base, 'pod 0')).toEqual({ ok: true });
    expect(seen.at(-1)).toMatchObject({ method: 'PUT', url: '/api/v1/kv/queen-operator/probe' });
    expect(JSON.parse(seen.at(-1)!.body)).toMatchObject({ ttlSeconds: 600 });
  });
  it('503 timeout and a hang are failures that say why', async () => {
    handler = answer(503, { error: 'the request deadline elapsed', code: 'timeout' });
    expect(await probeWrite(base, 'pod 1')).toEqual({
      ok: false,
      error: 'the write probe through pod 1 answered 503: {"error":"the request deadline elapsed","code":"timeout"}',
    });
    handler = () => undefined;
    expect(await probeWrite(base, 'pod 2', 300)).toEqual({ ok: false, error: 'the write probe through pod 2 got no answer within 0.3s' });
  });
  it('507 storage_full is the disk gate of the node asked, told apart from a lost quorum', async () => {
    handler = answer(507, { error: 'storage is full on at least one node', code: 'storage_full' });
    expect(await probeWrite(base, 'pod 0')).toEqual({
      ok: false,
      storageFull: true,
      error: 'the write probe through pod 0 answered 507: {"error":"storage is full on at least one node","code":"storage_full"}',
    });
  });
});

describe('a joint configuration left behind is finished with PUT voters (queen-broker-api 5.10)', () => {
  it('sends the exact voter set', async () => {
    handler = answer(200, view);
    await setVoters(base, [1, 2, 3, 4]);
    expect(seen.at(-1)).toMatchObject({ method: 'PUT', url: '/api/v1/system/raft/membership/voters' });
    expect(JSON.parse(seen.at(-1)!.body)).toEqual({ voters: [1, 2, 3, 4] });
  });
});

describe('an Admin token for brokers run with JWT_ENABLED (issue 12)', () => {
  it('is sent as a bearer token on the system routes and the probe; a 401 or 403 is told apart from no answer', async () => {
    const auth: (string | undefined)[] = [];
    handler = (req, _body, res) => {
      auth.push(req.headers.authorization);
      if (req.headers.authorization !== 'Bearer good') {
        res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'the token has expired', code: 'unauthorized' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ engine: 'raft', ok: true, membership: { nodeId: 1, source: 'leader', leader: 1, term: 2, voters: [1], learners: [], members: [] } }));
    };
    const ok = await readMembershipAnswer(base, 1000, 'good');
    expect(ok.refused).toBeNull();
    expect(ok.view?.leader).toBe(1);
    const refused = await readMembershipAnswer(base, 1000, 'stale');
    expect(refused).toEqual({ view: null, refused: { status: 401, error: 'the token has expired' } });
    expect(await readMembershipAnswer(base, 1000)).toMatchObject({ refused: { status: 401 } });
    const change = await removeMember(base, 3, 'stale');
    expect(change).toMatchObject({ ok: false, code: 'unauthorized', kind: 'permanent' });
    await removeMember(base, 3, 'good');
    await probeWrite(base, 'pod 0', 1000, new Date(), 'good');
    expect(auth).toEqual(['Bearer good', 'Bearer stale', undefined, 'Bearer stale', 'Bearer good', 'Bearer good']);
    expect(refusedWords({ token: null, problem: null, source: null }, 401, 'no token')).toBe(
      'the brokers ask for an Admin token on their membership API (401: no token): set spec.adminTokenSecret to a Secret key that holds one',
    );
    expect(refusedWords({ token: 'x', problem: null, source: 'Secret a, key b' }, 403, 'this route needs the Admin role')).toBe(
      'the brokers refuse the Admin token of Secret a, key b (403: this route needs the Admin role): put a valid token with the Admin role there',
    );
  });
});
