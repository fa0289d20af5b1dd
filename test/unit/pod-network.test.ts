// The test bed's pod network works out which addresses a pod's ports refuse from the pods that hold
// them. An address the kubelet handed out again, while the pod that had it is still being deleted,
// belongs to the new pod: a policy refusing the old pod's namespace must not refuse the new one.
import { expect, it } from 'vitest';
import { ipHolders } from '../testbed/network.ts';
import type { KObject } from '../testbed/kube.ts';

const pod = (ns: string, name: string, ip: string | undefined, created: string, extra: { deleting?: boolean; phase?: string } = {}): KObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { namespace: ns, name, uid: `${ns}/${name}`, creationTimestamp: created, ...(extra.deleting ? { deletionTimestamp: '2026-12-04T23:12:30Z' } : {}) },
  status: { podIP: ip, phase: extra.phase ?? 'Running' },
});

it('an address held by a pod being deleted and a new pod belongs to the new pod', () => {
  const old = pod('grow-a', 'queen-1', '127.1.1.20', '2026-12-04T23:10:00Z', { deleting: true });
  const fresh = pod('grow-b', 'queen-1', '127.1.1.20', '2026-12-04T23:12:10Z');
  expect(ipHolders([old, fresh]).map((p) => p.metadata.namespace)).toEqual(['grow-b']);
  expect(ipHolders([fresh, old]).map((p) => p.metadata.namespace)).toEqual(['grow-b']);
});

it('of two pods not being deleted the newer holds the address; pods without one, or finished, hold none', () => {
  const a = pod('x', 'a', '127.1.1.5', '2026-12-04T23:00:00Z');
  const b = pod('y', 'b', '127.1.1.5', '2026-12-04T23:05:00Z');
  const none = pod('x', 'c', undefined, '2026-12-04T23:00:00Z');
  const done = pod('x', 'd', '127.1.1.6', '2026-12-04T23:00:00Z', { phase: 'Succeeded' });
  const other = pod('x', 'e', '127.1.1.7', '2026-12-04T23:00:00Z');
  expect(ipHolders([a, b, none, done, other]).map((p) => p.metadata.name).sort()).toEqual(['b', 'e']);
});
