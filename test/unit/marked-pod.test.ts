// The chaos tracker's reading of a pod that is not Ready: marked from outside its kubelet (every
// container runs and says ready, as the node-lifecycle controller leaves a pod of a node whose
// Lease went stale) is the world's doing; a pod being deleted or whose container is not ready is not.
import { describe, expect, it } from 'vitest';
import { markedFromOutside } from '../chaos/tracker.ts';

const pod = (ready: boolean, containers: { ready: boolean; running: boolean }[], deleting = false) => ({
  metadata: { name: 'queen-1', ...(deleting ? { deletionTimestamp: '2026-12-07T00:00:00Z' } : {}) },
  status: {
    conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
    containerStatuses: containers.map((c) => ({ ready: c.ready, state: c.running ? { running: { startedAt: 'x' } } : { waiting: { reason: 'x' } } })),
  },
});

describe('markedFromOutside', () => {
  it('is a pod not Ready whose containers all run and are ready', () => {
    expect(markedFromOutside(pod(false, [{ ready: true, running: true }]))).toBe(true);
  });
  it('is not a Ready pod', () => {
    expect(markedFromOutside(pod(true, [{ ready: true, running: true }]))).toBe(false);
  });
  it('is not a pod whose container failed its readiness probe or stopped', () => {
    expect(markedFromOutside(pod(false, [{ ready: false, running: true }]))).toBe(false);
    expect(markedFromOutside(pod(false, [{ ready: true, running: false }]))).toBe(false);
    expect(markedFromOutside(pod(false, []))).toBe(false);
  });
  it('is not a pod being deleted', () => {
    expect(markedFromOutside(pod(false, [{ ready: true, running: true }], true))).toBe(false);
  });
});
