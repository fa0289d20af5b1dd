// The annotations a person sets: read one way everywhere, a value they do not take acts as unset
// (and is said in a Warning Event), and a replacement that cannot be done is refused without
// touching what runs.
import { describe, expect, it } from 'vitest';
import { annotationWarnings, readAnnotations, replaceRequest } from '../../crd/annotations.ts';
import type { QueenCluster } from '../../crd/schema.ts';
import { decide, type ClusterView, type RunningOperation } from '../../plan/decide.ts';
import { cluster, T0 } from './fixture.ts';

function view(annotations: Record<string, string>, over: { replicas?: 1 | 3 | 5; newTemplate?: boolean; formed?: boolean } = {}): ClusterView {
  const replicas = over.replicas ?? 3;
  const obs = cluster(replicas, replicas, 1);
  const qc: QueenCluster = {
    apiVersion: 'queenmq.com/v1alpha1',
    kind: 'QueenCluster',
    metadata: { name: 'queen', namespace: 'queen', uid: 'u1', annotations },
    spec: { version: '2.6.0', secretName: 'queen', replicas },
    status: over.formed === false ? {} : { voters: Array.from({ length: replicas }, (_, i) => i + 1) },
  };
  return {
    qc,
    wantedSpecHash: over.newTemplate ? 'spec2' : 'spec',
    wantedTemplateHash: over.newTemplate ? 'newer' : 'new',
    statefulSet: obs.statefulSet,
    servicesPresent: true,
    pods: obs.pods,
    claims: obs.claims,
  };
}
const upgrading: RunningOperation = { type: 'RollingUpgrade', workflowId: 'queencluster/queen/queen', runId: 'r1' };

describe('reading the annotations', () => {
  it('pause and cancel take true or false; anything else is unset, and said', () => {
    expect(readAnnotations({ 'queenmq.com/pause': 'true', 'queenmq.com/cancel': 'true' })).toMatchObject({ pause: true, cancel: true, problems: [] });
    expect(readAnnotations({ 'queenmq.com/pause': 'false', 'queenmq.com/cancel': 'false' })).toMatchObject({ pause: false, cancel: false, problems: [] });
    const r = readAnnotations({ 'queenmq.com/pause': 'yes', 'queenmq.com/cancel': 'True' });
    expect(r.pause).toBe(false);
    expect(r.cancel).toBe(false);
    expect(r.problems.map((p) => p.message)).toEqual([
      'queenmq.com/cancel="True" is not a value it takes (true or false): it is read as unset, nothing is cancelled',
      'queenmq.com/pause="yes" is not a value it takes (true or false): it is read as unset, nothing is paused',
    ]);
    expect(readAnnotations({ 'queenmq.com/pause': 'constructor' }).pause).toBe(false);
  });
  it('retry and backup take any value; replace-pod a name (empty is unset, and said)', () => {
    expect(readAnnotations({ 'queenmq.com/retry': '1714000000' }).retry).toBe('1714000000');
    expect(readAnnotations({}).retry).toBe('');
    expect(readAnnotations({ 'queenmq.com/backup': 'before-the-upgrade' }).backup).toBe('before-the-upgrade');
    expect(readAnnotations({}).backup).toBe('');
    expect(readAnnotations({ 'queenmq.com/replace-pod': 'queen-1' }).replacePod).toBe('queen-1');
    const empty = readAnnotations({ 'queenmq.com/replace-pod': '' });
    expect(empty.replacePod).toBeNull();
    expect(empty.problems[0]?.message).toMatch(/^queenmq\.com\/replace-pod is empty: it takes the name of a voter's pod, such as queen-1/);
  });
  it('an annotation of ours that does not exist is said; others are not ours to judge', () => {
    const r = readAnnotations({ 'queenmq.com/pasue': 'true', 'example.com/x': 'y', 'kubectl.kubernetes.io/last-applied-configuration': '{}' });
    expect(r.pause).toBe(false);
    expect(r.problems).toEqual([
      {
        annotation: 'queenmq.com/pasue',
        value: 'true',
        message: 'queenmq.com/pasue is not an annotation of this operator, which reads queenmq.com/replace-pod, queenmq.com/cancel, queenmq.com/retry, queenmq.com/approve, queenmq.com/finalize, queenmq.com/plan, queenmq.com/plan-only, queenmq.com/backup, queenmq.com/promote, queenmq.com/switchover, queenmq.com/pause: it is ignored',
      },
    ]);
  });
});

describe('a replacement', () => {
  const qc = (pod: string, replicas: 1 | 3 | 5 = 3) => view({ 'queenmq.com/replace-pod': pod }, { replicas }).qc;
  it("of a voter's pod is asked for; of any other pod, or of the only voter, refused with the reason", () => {
    expect(replaceRequest(qc('queen-1'), 3)).toEqual({ pod: 'queen-1', ordinal: 1, nodeId: 2 });
    expect(replaceRequest(qc('queen-3'), 3)).toEqual({
      pod: 'queen-3',
      refused: 'the pod asked to be replaced, "queen-3", is not a voter of this cluster: name a pod from queen-0 to queen-2 in queenmq.com/replace-pod, or remove it',
    });
    expect(replaceRequest(qc('other'), 3)).toMatchObject({ refused: expect.stringMatching(/^the pod asked to be replaced, "other", is not a voter/) });
    expect(replaceRequest(qc('queen-01'), 3)).toMatchObject({ refused: expect.any(String) });
    expect(replaceRequest(qc('queen-4', 5), 3)).toMatchObject({ refused: expect.stringMatching(/name a pod from queen-0 to queen-2/) });
    expect(replaceRequest(qc('queen-0', 1), 1)).toEqual({
      pod: 'queen-0',
      refused: 'queen-0 is the only voter: replacing it would lose every committed write; restore the cluster from a backup instead and remove the queenmq.com/replace-pod annotation',
    });
    expect(replaceRequest(view({}).qc, 3)).toBeNull();
  });
  it('refused: a running upgrade is not asked to yield, and goes on', () => {
    expect(decide(view({ 'queenmq.com/replace-pod': 'queen-7' }, { newTemplate: true }), upgrading, T0)).toEqual({ action: 'none', why: 'RollingUpgrade runs' });
    // A replacement that can be done still comes first.
    expect(decide(view({ 'queenmq.com/replace-pod': 'queen-1' }, { newTemplate: true }), upgrading, T0)).toMatchObject({ action: 'yield' });
  });
  it('refused: with nothing running it is Blocked, and nothing after it starts; forming comes first', () => {
    const refused = decide(view({ 'queenmq.com/replace-pod': 'queen-7' }, { newTemplate: true }), null, T0);
    expect(refused).toEqual({ action: 'refused', message: expect.stringMatching(/^the pod asked to be replaced, "queen-7", is not a voter of this cluster/) });
    expect(decide(view({ 'queenmq.com/replace-pod': 'queen-7' }), null, T0)).toMatchObject({ action: 'refused' });
    expect(decide(view({ 'queenmq.com/replace-pod': 'queen-7' }, { formed: false }), null, T0)).toMatchObject({ action: 'start', need: { type: 'FormCluster' } });
  });
  it('each warning once per annotation and value: the refusal as ReplaceRefused, values as InvalidAnnotation', () => {
    const w = annotationWarnings(view({ 'queenmq.com/replace-pod': 'queen-7', 'queenmq.com/pause': 'yes' }).qc, 3);
    expect(w.map((x) => [x.key, x.reason])).toEqual([
      ['queenmq.com/pause=yes', 'InvalidAnnotation'],
      ['queenmq.com/replace-pod=queen-7:refused', 'ReplaceRefused'],
    ]);
  });
});

describe('pause and cancel as the watcher reads them', () => {
  it('pause=false, or a value pause does not take, pauses nothing', () => {
    expect(decide(view({ 'queenmq.com/pause': 'true' }, { newTemplate: true }), null, T0)).toMatchObject({ action: 'paused' });
    expect(decide(view({ 'queenmq.com/pause': 'false' }, { newTemplate: true }), null, T0)).toMatchObject({ action: 'start' });
    expect(decide(view({ 'queenmq.com/pause': 'yes' }, { newTemplate: true }), null, T0)).toMatchObject({ action: 'start' });
  });
  it('cancel=false, or a value cancel does not take, cancels nothing', () => {
    expect(decide(view({ 'queenmq.com/cancel': 'true' }), upgrading, T0)).toMatchObject({ action: 'cancel' });
    expect(decide(view({ 'queenmq.com/cancel': 'false' }), upgrading, T0)).toMatchObject({ action: 'none' });
    expect(decide(view({ 'queenmq.com/cancel': 'please' }), upgrading, T0)).toMatchObject({ action: 'none' });
  });
});
