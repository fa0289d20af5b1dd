// The cluster link in the operator's terms (plan/link.ts, activities/link-objects.ts): the link
// status read, the phase a standby rests in and its words, what stands for its write probe, the
// refusals and the needs of the annotations, and the env and labels its pods get.
import { describe, expect, it } from 'vitest';
import { withDefaults } from '../../crd/defaults.ts';
import type { QueenCluster } from '../../crd/schema.ts';
import { linkEnv, linkPodLabels, linkSourceAddresses } from '../../activities/link-objects.ts';
import { compareVersions, linkNeed, linkRefusal, linkRole, parseLinkStatus, standbyAssessment, standbyBehind, standbyLinkUnread, standbyProbe, standbyProbeStatus, standbysOf, standbyStatus } from '../../plan/link.ts';

const standby = { source: { cluster: { name: 'queen' } }, tokenSecret: { name: 'link', key: 'token' } };

const status = (over: Record<string, unknown> = {}) => ({
  role: 'standby',
  leader: true,
  id: '5e1f09c2',
  position: { index: 4123, term: 7, nowUs: 1_796_568_947_386_000 },
  follower: { state: 'following', source: 'queen-0.queen-headless.ns.svc.cluster.local:7400', scanned: 4123, sourceApplied: 4125, lagEntries: 2, lagMs: 114, lastAnswerMs: 30, error: null },
  ...over,
});

const obsOf = (json: unknown) => ({ link: parseLinkStatus(0, json), at: 1_796_568_948_000 });

function qc(over: Partial<QueenCluster> & { annotations?: Record<string, string> } = {}): QueenCluster {
  return {
    apiVersion: 'queenmq.com/v1alpha1',
    kind: 'QueenCluster',
    metadata: { name: 'dr', namespace: 'ns', annotations: over.annotations ?? {} },
    spec: { version: '2.6.0', secretName: 'dr', standby },
    ...over,
  } as QueenCluster;
}

describe('the link status', () => {
  it('is read as the broker gives it, and rests a following standby in Standby', () => {
    const obs = obsOf(status());
    expect(obs.link).toMatchObject({ role: 'standby', leader: true, position: { index: 4123, term: 7, at: 1_796_568_947_386 } });
    expect(linkRole(obs, { standby })).toBe('standby');
    expect(standbyAssessment(obs, { standby }, 'ns')).toEqual({ phase: 'Standby', message: '' });
    expect(standbyProbe(obs, { standby }, 'ns')).toEqual({ ok: true });
    expect(standbyStatus(obs, { standby }, 'ns')).toEqual({
      source: 'ns/queen',
      state: 'following',
      reading: 'queen-0.queen-headless.ns.svc.cluster.local:7400',
      position: 4123,
      lagEntries: 2,
      lagSeconds: 0.114,
      lastAppliedAt: '2026-12-06T14:55:47.386Z',
      lastAnswerAt: '2026-12-06T14:55:47.970Z',
      error: null,
    });
  });

  it('a refused token is Degraded with the Secret to fix; a silent source after a while; a halted standby at once', () => {
    const refused = obsOf(status({ follower: { ...status().follower, state: 'waiting', lastAnswerMs: null, error: 'http://queen-0:7400/link/v1/read: the source refused this standby\'s QUEEN_LINK_SOURCE_TOKEN' } }));
    const a = standbyAssessment(refused, { standby }, 'ns')!;
    expect(a.phase).toBe('Degraded');
    expect(a.message).toBe(
      "the standby's source ns/queen does not answer it: http://queen-0:7400/link/v1/read: the source refused this standby's QUEEN_LINK_SOURCE_TOKEN; " +
        "the link token is key token of Secret link: it must hold the source's QUEEN_LINK_TOKEN (its spec.link.tokenSecret)",
    );
    expect(standbyProbe(refused, { standby }, 'ns')).toEqual({ ok: false, error: a.message });
    // A source that stopped answering a moment ago: the follower retries, nothing to say yet.
    const brief = obsOf(status({ follower: { ...status().follower, state: 'waiting', lastAnswerMs: 3000, error: 'connection refused' } }));
    expect(standbyAssessment(brief, { standby }, 'ns')?.phase).toBe('Standby');
    const silent = obsOf(status({ follower: { ...status().follower, state: 'waiting', lastAnswerMs: 12_000, error: 'connection refused' } }));
    expect(standbyAssessment(silent, { standby }, 'ns')?.message).toBe("the standby's source ns/queen does not answer it: connection refused");
    const halted = obsOf(status({ follower: { ...status().follower, state: 'halted', error: 'the source node x purged its log up to 9 and this standby is at 4: it needs a new seed' } }));
    expect(standbyAssessment(halted, { standby }, 'ns')?.message).toBe(
      'the standby stopped following its source ns/queen: the source node x purged its log up to 9 and this standby is at 4: it needs a new seed',
    );
  });

  it('a cluster configured as a standby that holds data of its own is Blocked; a promoted one is an ordinary cluster', () => {
    const primary = obsOf({ role: 'primary', leader: true, follower: { state: 'idle' } });
    expect(standbyAssessment(primary, { standby }, 'ns')?.phase).toBe('Blocked');
    const promoted = obsOf(status({ role: 'promoted', follower: undefined }));
    expect(linkRole(promoted, { standby })).toBe('promoted');
    expect(standbyAssessment(promoted, { standby }, 'ns')).toBeNull();
    // A source that a standby reads.
    expect(linkRole(obsOf({ role: 'primary', leader: true, readers: [{ name: 'standby-1', after: 3, idleMs: 10 }] }), {})).toBe('source');
  });

  it('a standby whose link role is not read yet sends no write probe; a primary, a following standby and a promoted one are read', () => {
    // No leader answers the link yet, or the node that leads joined a seeded standby and has not applied its role row.
    expect(standbyLinkUnread({ link: null }, { standby }, { role: 'standby' })).toBe(true);
    expect(standbyLinkUnread(obsOf({ role: 'primary', leader: true }), { standby }, { role: 'standby' })).toBe(true);
    expect(standbyLinkUnread(obsOf(status()), { standby }, { role: 'standby' })).toBe(false);
    // Data of its own (it follows nothing): its writes commit, and it is Blocked for that reason.
    expect(standbyLinkUnread(obsOf({ role: 'primary', leader: true, follower: { state: 'idle' } }), { standby }, undefined)).toBe(false);
    expect(standbyLinkUnread({ link: null }, { standby }, { role: 'promoted' })).toBe(false);
    expect(standbyLinkUnread({ link: null }, {}, undefined)).toBe(false);
  });

  it("a standby's COMMITS comes with the look that says how it follows: true while it follows, false with the reason while it does not", () => {
    const at = new Date(1_796_568_948_000);
    expect(standbyProbeStatus(obsOf(status()), { standby }, 'ns', at)).toEqual({ commits: true, lastProbeTime: '2026-12-06T14:55:48.000Z', lastProbeError: null });
    const halted = obsOf(status({ follower: { ...status().follower, state: 'halted', error: 'it needs a new seed' } }));
    expect(standbyProbeStatus(halted, { standby }, 'ns', at)).toEqual({
      commits: false,
      lastProbeTime: '2026-12-06T14:55:48.000Z',
      lastProbeError: 'the standby stopped following its source ns/queen: it needs a new seed',
    });
    // Not a standby (a primary, a promoted one, no link read): its COMMITS is a write's, sent by the probe.
    expect(standbyProbeStatus(obsOf({ role: 'primary', leader: true }), { standby }, 'ns', at)).toBeNull();
    expect(standbyProbeStatus(obsOf(status({ role: 'promoted', follower: undefined })), { standby }, 'ns', at)).toBeNull();
    expect(standbyProbeStatus({ link: null }, { standby }, 'ns', at)).toBeNull();
  });
});

describe('the link annotations', () => {
  it('promote and switchover are needs of a standby, refused with the reason elsewhere', () => {
    expect(linkNeed(qc({ annotations: { 'queenmq.com/promote': 'true' }, status: { role: 'standby' } }))).toMatchObject({ type: 'PromoteStandby', fingerprint: 'promote:true' });
    expect(linkNeed(qc({ annotations: { 'queenmq.com/switchover': 'true' }, status: { role: 'standby' } }))).toMatchObject({ type: 'Switchover' });
    const primary = qc({ annotations: { 'queenmq.com/promote': 'true' }, status: { role: 'primary' } });
    primary.spec.standby = undefined;
    expect(linkNeed(primary)).toBeNull();
    expect(linkRefusal(primary)).toBe('dr is not a standby: there is nothing to promote; remove the queenmq.com/promote annotation');
    const far = qc({ annotations: { 'queenmq.com/switchover': 'true' }, status: { role: 'standby' } });
    far.spec.standby = { ...standby, source: { addresses: ['queen-0.example.net:7400'] } } as never;
    expect(linkRefusal(far)).toMatch(/^a switchover needs the source as a QueenCluster of this Kubernetes cluster/);
    const removed = qc({ status: { role: 'standby' } });
    removed.spec.standby = undefined;
    expect(linkRefusal(removed)).toMatch(/^spec.standby was removed, but the cluster is still a standby/);
  });
});

describe('the link in the pods', () => {
  it('a standby names every pod a QueenCluster source may have, presents and serves the token, and starts from a seed', () => {
    const spec = withDefaults(qc().spec);
    expect(linkSourceAddresses(qc(), spec)).toEqual([0, 1, 2, 3, 4].map((i) => `queen-${i}.queen-headless.ns.svc.cluster.local:7400`));
    const env = Object.fromEntries(linkEnv(qc(), spec).map((e) => [e.name, e.value ?? e.valueFrom?.secretKeyRef?.name]));
    expect(env).toEqual({
      QUEEN_LINK_TOKEN: 'link',
      QUEEN_LINK_SOURCE: linkSourceAddresses(qc(), spec).join(','),
      QUEEN_LINK_SOURCE_TOKEN: 'link',
      QUEEN_LINK_SEED: '1',
      QUEEN_LINK_NAME: 'ns.dr',
    });
    expect(linkPodLabels(spec)).toEqual({ 'queenmq.com/link': 'true' });
    const empty = withDefaults({ ...qc().spec, standby: { ...standby, seed: false } });
    expect(linkEnv(qc(), empty).find((e) => e.name === 'QUEEN_LINK_STANDBY')?.value).toBe('true');
    const source = withDefaults({ version: '2.6.0', secretName: 'q', link: { tokenSecret: { name: 'link', key: 'token' } } });
    expect(linkEnv(qc(), source).map((e) => e.name)).toEqual(['QUEEN_LINK_TOKEN']);
    expect(linkPodLabels(source)).toEqual({});
  });
});

describe('a source and its standbys', () => {
  it('an upgrade of a source waits for its standbys to run the new version', () => {
    const src = { metadata: { name: 'queen', namespace: 'ns' } };
    const all = [
      qc(),
      { ...qc(), metadata: { name: 'far', namespace: 'other' }, spec: { ...qc().spec, standby: { ...standby, source: { cluster: { name: 'queen', namespace: 'ns' } } } } },
      { ...qc(), metadata: { name: 'old', namespace: 'ns' }, status: { role: 'promoted' as const } },
      { ...qc(), metadata: { name: 'plain', namespace: 'ns' }, spec: { version: '2.6.0', secretName: 'p' } },
    ] as QueenCluster[];
    expect(standbysOf(src, all)).toEqual([
      { name: 'ns/dr', version: '2.6.0' },
      { name: 'other/far', version: '2.6.0' },
    ]);
    expect(compareVersions('2.6.1', '2.6.0')).toBe(1);
    expect(compareVersions('2.10.0', '2.9.9')).toBe(1);
    expect(compareVersions('2.6', '2.6.0')).toBe(0);
    expect(compareVersions('latest', '2.6.0')).toBeNull();
    const source = (version: string) => ({ spec: { version, secretName: 'q' }, status: { standbys: [{ name: 'ns/dr', version: '2.6.0' }] } });
    expect(standbyBehind(source('2.6.1'))).toBe(
      'the standby ns/dr runs 2.6.0: upgrade it to 2.6.1 first; a source on a newer version can write entries its standby does not read yet, and its replay would stop',
    );
    expect(standbyBehind(source('2.6.0'))).toBeNull();
  });
});
