// The one-way door (plan/door.ts): what each version's build reads, learned from the brokers;
// the cluster's catalogue version; whether a version change can start, and what a person is told.
import { describe, expect, it } from 'vitest';
import type { QueenCluster, QueenClusterSpec } from '../../crd/schema.ts';
import {
  clusterCatalogue,
  closedDoor,
  finalizationText,
  holdsClusterVersion,
  raiseNote,
  rollbackRefusedText,
  versionDoor,
  versionRefusedText,
  versionsSeen,
  VERSIONS_KEPT,
  type VersionRead,
} from '../../plan/door.ts';
import type { Observation } from '../../plan/observation.ts';
import { recordedVersion } from '../../activities/status.ts';
import { cluster, T0 } from './fixture.ts';

/** Every pod on `version`, its build reading `kinds`, the cluster at `clusterVersion` on each node. */
function on(version: string, kinds: number, clusterVersion: number): Observation {
  const obs = cluster(3, 3, 2);
  for (const p of obs.pods) p.image = `ghcr.io/queen-mq/queen:${version}`;
  for (const h of Object.values(obs.health)) Object.assign(h, { version, kinds, clusterVersion });
  return obs;
}

const NOW = new Date(T0);
const seen = (version: string, kinds: number, seenAt = '2026-11-01T00:00:00.000Z'): VersionRead => ({ version, kinds, seenAt });

function qc(spec: Partial<QueenClusterSpec>, annotations: Record<string, string> = {}, status: QueenCluster['status'] = {}): QueenCluster {
  return {
    apiVersion: 'queenmq.com/v1alpha1',
    kind: 'QueenCluster',
    metadata: { name: 'queen', namespace: 'prod', uid: 'u1', annotations },
    spec: { version: '2.7.0', secretName: 'queen', ...spec },
    status,
  };
}

describe('what each version reads', () => {
  it('is recorded from what the pods report, keyed by their image tag, and kept for versions no pod runs now', () => {
    const v = versionsSeen([seen('2.6.0', 6)], on('2.7.0', 7, 7), recordedVersion, NOW);
    expect(v).toEqual([seen('2.6.0', 6), { version: '2.7.0', kinds: 7, seenAt: NOW.toISOString() }]);
    // Seen again with the same reading: the same record (no write at every look).
    expect(versionsSeen(v, on('2.7.0', 7, 7), recordedVersion, new Date(T0 + 60_000))).toEqual(v);
  });

  it('is never guessed: a pod that does not say what its build reads records nothing', () => {
    const obs = on('2.7.0', 7, 7);
    for (const h of Object.values(obs.health)) h.kinds = null;
    expect(versionsSeen([], obs, recordedVersion, NOW)).toEqual([]);
  });

  it('keeps the versions that run now, then the ones seen last, at most VERSIONS_KEPT', () => {
    const old = Array.from({ length: VERSIONS_KEPT + 2 }, (_, i) => seen(`2.5.${i}`, 6, `2026-10-${String(10 + i).padStart(2, '0')}T00:00:00.000Z`));
    const v = versionsSeen(old, on('2.7.0', 7, 7), recordedVersion, new Date('2026-09-01T00:00:00Z'));
    expect(v).toHaveLength(VERSIONS_KEPT);
    expect(v.map((r) => r.version)).toContain('2.7.0');
    expect(v.map((r) => r.version)).not.toContain('2.5.0');
  });
});

describe("the cluster's catalogue version", () => {
  it('is the highest a broker reports, and never lower than recorded', () => {
    const obs = on('2.7.0', 7, 7);
    obs.health[0]!.clusterVersion = 6; // a node that has not applied the raise yet
    expect(clusterCatalogue(obs, 6)).toBe(7);
    expect(clusterCatalogue(on('2.7.0', 7, 6), 7)).toBe(7);
    expect(clusterCatalogue(cluster(3, 3, 2), null)).toBeNull();
  });
});

describe('the door of a version', () => {
  const versions = [seen('2.6.0', 6), seen('2.6.1', 6), seen('2.7.0', 7)];

  it('is closed for a version whose build reads less than the cluster is at', () => {
    expect(closedDoor('2.6.0', versions, 7)).toEqual({ version: '2.6.0', reads: 6, clusterVersion: 7, canStart: ['2.7.0'] });
    expect(closedDoor('2.6.0', versions, 6)).toBeNull();
    expect(closedDoor('2.7.0', versions, 7)).toBeNull();
  });

  it('is not closed for a version that has not run here: what it reads is not known', () => {
    expect(closedDoor('2.5.0', versions, 7)).toBeNull();
    expect(closedDoor('2.6.0', versions, null)).toBeNull();
  });

  it('is judged by the recorded readings against the catalogue version a broker reports now', () => {
    expect(versionDoor({ clusterVersion: 6, versions }, on('2.7.0', 7, 7), '2.6.1')).toMatchObject({ reads: 6, clusterVersion: 7 });
  });

  it('says both numbers and what a person can do: the version the pods run, with the command', () => {
    const d = closedDoor('2.6.0', versions, 7)!;
    expect(versionRefusedText(d, { namespace: 'prod', name: 'queen' }, '2.7.0')).toBe(
      '2.6.0 cannot start on this cluster: its build reads catalogue version 6 and the cluster is at 7: no pod is stopped; ' +
        'set spec.version back to 2.7.0 (or to a version whose build reads 7 or more): ' +
        `kubectl -n prod patch queencluster queen --type merge -p '{"spec":{"version":"2.7.0"}}'`,
    );
    expect(versionRefusedText({ ...d, canStart: [] }, { namespace: 'prod', name: 'queen' }, null)).toBe(
      '2.6.0 cannot start on this cluster: its build reads catalogue version 6 and the cluster is at 7: no pod is stopped; set spec.version to a version whose build reads 7 or more',
    );
    expect(rollbackRefusedText(d, '2.7.0', 'pod 2 crash-loops on 2.7.0: its container exited with code 1 (3 restarts)')).toBe(
      'the upgrade to 2.7.0 failed: pod 2 crash-loops on 2.7.0: its container exited with code 1 (3 restarts); it cannot roll back: ' +
        '2.6.0 cannot start on this cluster: its build reads catalogue version 6 and the cluster is at 7, and no pod goes back to it; ' +
        'set spec.version to a version whose build reads 7 or more (a fixed 2.7.0)',
    );
    // An upgrade that holds on its failure (onFailure Hold) says it holds, and suggests no rollback.
    expect(rollbackRefusedText(d, '2.7.0', 'a reason', 'holds')).toMatch(/^the upgrade to 2\.7\.0 holds: a reason; it cannot roll back: /);
  });
});

describe('finalization', () => {
  const versions = [seen('2.6.0', 6), seen('2.7.0', 7)];

  it('open: the cluster is below what the build of the version the pods run reads; the way back names the versions that can start', () => {
    expect(finalizationText({ obs: on('2.7.0', 7, 6), version: '2.7.0', clusterVersion: 6, versions })).toBe('2.7.0, not finalized: the way back to 2.6.0 is open');
    expect(finalizationText({ obs: on('2.7.0', 7, 6), version: '2.7.0', clusterVersion: 6, versions: [seen('2.7.0', 7)] })).toBe(
      '2.7.0, not finalized: the cluster stays at catalogue version 6 while its build reads 7',
    );
  });

  it('closed: finalized at the catalogue version, with the versions that can no longer start', () => {
    expect(finalizationText({ obs: on('2.7.0', 7, 7), version: '2.7.0', clusterVersion: 7, versions })).toBe('2.7.0, finalized at catalogue version 7: 2.6.0 (reads 6) can no longer start on it');
    expect(finalizationText({ obs: on('2.6.0', 6, 6), version: '2.6.0', clusterVersion: 6, versions: [seen('2.6.0', 6)] })).toBe('2.6.0, finalized at catalogue version 6');
  });

  it('nothing while the pods run two versions, or a pod does not say what its build reads', () => {
    expect(finalizationText({ obs: on('2.7.0', 7, 6), version: '2.6.0→2.7.0 (1/3)', clusterVersion: 6, versions })).toBeNull();
    const silent = on('2.7.0', 7, 6);
    silent.health[1]!.kinds = null;
    expect(finalizationText({ obs: silent, version: '2.7.0', clusterVersion: 6, versions })).toBeNull();
  });

  it('the pods hold the cluster version with finalize Manual until the finalize annotation names spec.version', () => {
    expect(holdsClusterVersion(qc({}))).toBe(false);
    expect(holdsClusterVersion(qc({ upgrade: { finalize: 'Manual' } }))).toBe(true);
    expect(holdsClusterVersion(qc({ upgrade: { finalize: 'Manual' } }, { 'queenmq.com/finalize': '2.6.0' }))).toBe(true);
    expect(holdsClusterVersion(qc({ upgrade: { finalize: 'Manual' } }, { 'queenmq.com/finalize': '2.7.0' }))).toBe(false);
  });
});

describe('what a plan says of the raise', () => {
  it('a known build that reads more: the raise after the last pod, and what cannot start after it', () => {
    expect(raiseNote(qc({}, {}, { clusterVersion: 6, versions: [seen('2.6.0', 6), seen('2.7.0', 7)] }), on('2.6.0', 6, 6))).toBe(
      'once every pod runs 2.7.0, the leader raises the cluster from catalogue version 6 to 7: from then on 2.6.0 cannot start on it (spec.upgrade.finalize: Manual keeps the way back open)',
    );
  });

  it('a version that has not run here: what would happen if it reads more', () => {
    expect(raiseNote(qc({}, {}, { clusterVersion: 6, versions: [seen('2.6.0', 6)] }), on('2.6.0', 6, 6))).toBe(
      '2.7.0 has not run here: if its build reads more than catalogue version 6, the leader raises the cluster to it once every pod runs 2.7.0, and 2.6.0 cannot start on it after that (spec.upgrade.finalize: Manual keeps the way back open)',
    );
  });

  it('finalize Manual: the cluster stays; a build that reads no more: nothing to say', () => {
    expect(raiseNote(qc({ upgrade: { finalize: 'Manual' } }, {}, { clusterVersion: 6, versions: [seen('2.7.0', 7)] }), on('2.6.0', 6, 6))).toBe(
      'the cluster stays at catalogue version 6 (spec.upgrade.finalize: Manual): the way back stays open until the queenmq.com/finalize annotation names 2.7.0',
    );
    expect(raiseNote(qc({ version: '2.6.1' }, {}, { clusterVersion: 6, versions: [seen('2.6.1', 6)] }), on('2.6.0', 6, 6))).toBeNull();
  });
});
