// Volume growth as table tests: the reference operator's scenario S11. Every claim asks for the
// new size, all in one step; a file system that waits for a restart gets one; then the StatefulSet
// is created again with the new claim template.
import { describe, expect, it } from 'vitest';
import type { Observation } from '../../plan/observation.ts';
import { nextVolumeStep } from '../../plan/volumes.ts';
import { cluster } from './fixture.ts';

const GI = 1024 ** 3;
const step = (obs: Observation, template = 50 * GI) => nextVolumeStep(obs, '100Gi', 100 * GI, template);

describe('volumes grow before the StatefulSet takes the new size (S11)', () => {
  it('expands each claim, waits for the volumes, restarts the pod that needs it, recreates the StatefulSet', () => {
    const obs = cluster(3, 3, 3);
    expect(step(obs)).toEqual({
      kind: 'expand-claims',
      claims: [
        { ordinal: 0, claimName: 'data-queen-0', claimUid: 'claim-a', message: 'growing the volume of pod 0 to 100Gi' },
        { ordinal: 1, claimName: 'data-queen-1', claimUid: 'claim-b', message: 'growing the volume of pod 1 to 100Gi' },
        { ordinal: 2, claimName: 'data-queen-2', claimUid: 'claim-c', message: 'growing the volume of pod 2 to 100Gi' },
      ],
      size: '100Gi',
      message: 'growing the volumes of pods 0, 1 and 2 to 100Gi',
    });
    // One claim still smaller (the others grew): that one alone, in its own words.
    Object.assign(obs.claims[0]!, { request: '100Gi', requestBytes: 100 * GI });
    Object.assign(obs.claims[2]!, { request: '100Gi', requestBytes: 100 * GI });
    expect(step(obs)).toMatchObject({ kind: 'expand-claims', claims: [{ ordinal: 1 }], message: 'growing the volume of pod 1 to 100Gi' });
    for (const c of obs.claims) Object.assign(c, { request: '100Gi', requestBytes: 100 * GI });
    expect(step(obs)).toEqual({ kind: 'wait', message: 'the volume of pod 0 is growing to 100Gi', gate: 'volume-grown' });
    obs.claims[0]!.capacityBytes = 100 * GI;
    obs.claims[1]!.resizePending = true;
    expect(step(obs)).toEqual({
      kind: 'restart',
      ordinal: 1,
      message: 'restarting pod 1 to finish growing its volume',
      next: 'pod 1 must restart to finish growing its volume',
    });
    obs.claims[1]!.capacityBytes = 100 * GI;
    obs.claims[2]!.capacityBytes = 100 * GI;
    expect(step(obs)).toEqual({ kind: 'recreate', pods: 3, size: '100Gi', message: 'recreating the StatefulSet with 100Gi volumes; its pods keep running' });
    expect(step(obs, 100 * GI)).toEqual({ kind: 'done', size: '100Gi' });
  });
  it('a claim not bound yet (no capacity) is not waited for', () => {
    const obs = cluster(3, 3, 3);
    for (const c of obs.claims) Object.assign(c, { request: '100Gi', requestBytes: 100 * GI });
    obs.claims[0]!.capacityBytes = 0;
    obs.claims[1]!.capacityBytes = 100 * GI;
    obs.claims[2]!.capacityBytes = 100 * GI;
    expect(step(obs, 100 * GI)).toEqual({ kind: 'done', size: '100Gi' });
  });
});

describe('a grow that restarted pods ends with them Ready again', () => {
  it('waits for the pods it restarted, not for others, and not before the StatefulSet is made again', () => {
    const obs = cluster(3, 3, 3);
    for (const c of obs.claims) Object.assign(c, { request: '100Gi', requestBytes: 100 * GI, capacityBytes: 100 * GI });
    Object.assign(obs.pods[2]!, { uid: 'successor', ready: false, readySince: null });
    Object.assign(obs.pods[1]!, { ready: false, readySince: null });
    // The StatefulSet still has the old claim template: it is made again while pod 2 starts.
    expect(nextVolumeStep(obs, '100Gi', 100 * GI, 50 * GI, [0, 2])).toMatchObject({ kind: 'recreate' });
    expect(nextVolumeStep(obs, '100Gi', 100 * GI, 100 * GI, [0, 2])).toEqual({ kind: 'wait', message: 'pod 2 is not Ready yet after its restart', gate: 'pod-ready' });
    obs.pods[0]!.terminating = true;
    expect(nextVolumeStep(obs, '100Gi', 100 * GI, 100 * GI, [2, 0])).toEqual({ kind: 'wait', message: 'pods 0 and 2 are not Ready yet after their restarts', gate: 'pod-ready' });
    // A pod it restarted is on a node that stopped reporting: the node is named, with what to do.
    obs.pods[0]!.nodeDown = { node: 'node-1', ready: 'Unknown', since: Date.parse('2026-12-07T06:00:00Z'), message: null };
    expect(nextVolumeStep(obs, '100Gi', 100 * GI, 100 * GI, [2, 0])).toEqual({
      kind: 'wait',
      message:
        'pod 0 is on node node-1, which has not reported since 06:00:00 UTC (it is off or cut off from the API server): this waits for the node to come back; ' +
        'if it is shut down for good, kubectl taint nodes node-1 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute lets pod 0 start on another node',
      gate: 'pod-ready',
    });
    obs.pods[0]!.nodeDown = null;
    obs.pods[0]!.terminating = false;
    obs.pods[2]!.ready = true;
    // Pod 1 was not restarted by this grow: not waited for.
    expect(nextVolumeStep(obs, '100Gi', 100 * GI, 100 * GI, [0, 2])).toEqual({ kind: 'done', size: '100Gi' });
  });
});

describe('a second raise during a grow retargets it (issue 8, item 10)', () => {
  it('every step carries the size the spec asks for now, and the re-creation the pod count of the StatefulSet', () => {
    const obs = cluster(3, 3, 3);
    // Claim 0 grew to 100Gi and waits for its pod; then 200Gi is asked.
    for (const c of obs.claims) Object.assign(c, { request: '100Gi', requestBytes: 100 * GI, capacityBytes: 100 * GI });
    expect(nextVolumeStep(obs, '200Gi', 200 * GI, 50 * GI)).toMatchObject({ kind: 'expand-claims', size: '200Gi', message: 'growing the volumes of pods 0, 1 and 2 to 200Gi' });
    for (const c of obs.claims) Object.assign(c, { request: '200Gi', requestBytes: 200 * GI, capacityBytes: 200 * GI });
    obs.statefulSet!.replicas = 5;
    expect(nextVolumeStep(obs, '200Gi', 200 * GI, 100 * GI)).toEqual({
      kind: 'recreate',
      pods: 5,
      size: '200Gi',
      message: 'recreating the StatefulSet with 200Gi volumes; its pods keep running',
    });
    expect(nextVolumeStep(obs, '200Gi', 200 * GI, 200 * GI)).toEqual({ kind: 'done', size: '200Gi' });
  });
  it('without its StatefulSet a grow waits for the cluster to be formed again', () => {
    const obs = cluster(3, 3, 3);
    obs.statefulSet = null;
    expect(step(obs)).toEqual({ kind: 'wait', message: 'the StatefulSet queen is gone: the cluster has to be formed again', gate: 'statefulset-present' });
  });
});

describe('growth that does not go as asked (issue 12)', () => {
  const asked = (obs: Observation) => {
    for (const c of obs.claims) Object.assign(c, { request: '100Gi', requestBytes: 100 * GI });
  };
  it('a size the storage refuses after the API server accepted it is Blocked with the storage\'s words', () => {
    const obs = cluster(3, 3, 3);
    asked(obs);
    Object.assign(obs.claims[0]!, { resizeInfeasible: true, resizeError: 'resize volume "pvc-1" failed: rpc error: code = OutOfRange desc = too big' });
    expect(step(obs)).toEqual({
      kind: 'wait',
      phase: 'Blocked',
      message: 'the volume of pod 0 cannot grow to 100Gi: resize volume "pvc-1" failed: rpc error: code = OutOfRange desc = too big',
      gate: 'volume-can-grow',
    });
  });
  it('a resizer that fails and tries again is waited for, with its error', () => {
    const obs = cluster(3, 3, 3);
    asked(obs);
    obs.claims[0]!.resizeError = 'rpc error: code = Unavailable desc = down';
    expect(step(obs)).toEqual({ kind: 'wait', message: 'the volume of pod 0 is growing to 100Gi, but its storage fails and tries again: rpc error: code = Unavailable desc = down', gate: 'volume-grown' });
  });
  it('a file system waiting for its node gets a moment to grow online before its pod is restarted', () => {
    const obs = cluster(3, 3, 3);
    asked(obs);
    Object.assign(obs.claims[0]!, { resizePending: true, resizePendingSince: obs.at - 5_000 });
    expect(step(obs)).toEqual({ kind: 'wait', message: "the file system of pod 0's volume is growing to 100Gi", gate: 'volume-grown' });
    obs.claims[0]!.resizePendingSince = obs.at - 25_000;
    expect(step(obs)).toMatchObject({ kind: 'restart', ordinal: 0 });
  });
  it('a node that says it cannot grow the mounted file system (NodeResizeError) gets no more moments: the pod restarts at once', () => {
    const obs = cluster(3, 3, 3);
    asked(obs);
    obs.pods[0]!.scheduledAt = obs.at - 60_000;
    Object.assign(obs.claims[0]!, { resizePending: true, resizePendingSince: obs.at - 3_000, onlineGrowthFailedAt: obs.at - 1_000 });
    expect(step(obs)).toMatchObject({ kind: 'restart', ordinal: 0, message: 'restarting pod 0 to finish growing its volume' });
    // The failure was the pod before this one's (its successor grows the file system as it mounts
    // the volume): it is given its moments, then restarted.
    obs.pods[0]!.scheduledAt = obs.at - 500;
    expect(step(obs)).toEqual({ kind: 'wait', message: "the file system of pod 0's volume is growing to 100Gi", gate: 'volume-grown' });
    obs.claims[0]!.resizePendingSince = obs.at - 25_000;
    expect(step(obs)).toMatchObject({ kind: 'restart', ordinal: 0 });
  });
  it('a pod that has not started yet grows its file system as it starts: it is waited for, not restarted again', () => {
    const obs = cluster(3, 3, 3);
    asked(obs);
    Object.assign(obs.claims[0]!, { resizePending: true, resizePendingSince: obs.at - 25_000 });
    Object.assign(obs.pods[0]!, { uid: 'successor', phase: 'Pending', running: false, ready: false, readySince: null });
    expect(step(obs)).toEqual({ kind: 'wait', message: "the file system of pod 0's volume grows to 100Gi as pod 0 starts", gate: 'volume-grown' });
    obs.pods[0]!.phase = 'Running';
    expect(step(obs)).toMatchObject({ kind: 'restart', ordinal: 0 });
    obs.pods[0]!.terminating = true;
    expect(step(obs)).toMatchObject({ kind: 'wait', gate: 'volume-grown' });
  });
});
