// A pod on a node that stops reporting (issue 9: a node stopped under an upgrade or a scale-up was
// not named for as long as it was down). Every wait that names a pod names its node and what a
// person can do; a node that dies is no verdict on a new version.
import type { V1Node } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { nodeDown } from '../../activities/observe.ts';
import { assess, podStartProblem } from '../../plan/assess.ts';
import { nodeDownProblem, stopGate, voterNodeDownProblem } from '../../plan/gates.ts';
import type { NodeDown, Observation } from '../../plan/observation.ts';
import { canaryProblem, newVersionFailure, notReadyAndLive, replacedVoterWait } from '../../plan/progress.ts';
import { cluster, member, pod, setMember, T0 } from './fixture.ts';

const SILENT: NodeDown = { node: 'node-1', ready: 'Unknown', since: Date.parse('2026-11-29T11:59:20Z'), message: null };
const NAMED =
  'pod 1 is on node node-1, which has not reported since 11:59:20 UTC (it is off or cut off from the API server): this waits for the node to come back; ' +
  'if it is shut down for good, kubectl taint nodes node-1 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute lets pod 1 start on another node';

/** Pod 1's node stopped: the node controller marked the pod not Ready, the leader lost node 2. */
function stopped(): Observation {
  const obs = cluster(3, 3, 1);
  Object.assign(pod(obs, 1), { node: 'node-1', ready: false, nodeDown: SILENT });
  delete obs.health[1];
  setMember(obs, { ...member(2, true, 40), live: false });
  return obs;
}
const opts = { minReadyMs: 0, stallAfterMs: 60_000, caughtUpEntries: 100 };

describe('a pod on a node that does not report', () => {
  it('is read from the Node: Ready Unknown is a silent kubelet, False says why, True is nothing', () => {
    const node = (status: string, message?: string): V1Node => ({
      metadata: { name: 'node-1' },
      status: { conditions: [{ type: 'Ready', status, lastTransitionTime: new Date(SILENT.since!), message, reason: 'NodeStatusUnknown' }] },
    });
    expect(nodeDown(node('Unknown', 'Kubelet stopped posting node status.'))).toEqual(SILENT);
    expect(nodeDown(node('False', 'container runtime network not ready'))).toEqual({ ...SILENT, ready: 'False', message: 'container runtime network not ready' });
    expect(nodeDown(node('True'))).toBeNull();
    const p = { ...pod(stopped(), 1), nodeDown: { ...SILENT, ready: 'False' as const, message: 'container runtime network not ready' } };
    expect(nodeDownProblem(p)).toContain('which is NotReady since 11:59:20 UTC (container runtime network not ready): this waits');
  });

  it('is named by the stop gate, the phase at rest and the wait for a pod to start, with what to do', () => {
    const obs = stopped();
    // Stopping pod 2 waits on pod 1; the gate says why pod 1 is not Ready, and that a node lifts it.
    expect(stopGate({ obs, memory: {}, target: 2, opts })).toEqual({ gate: 'node-down', reason: NAMED });
    expect(assess({ obs, memory: {}, formed: true, probe: null, stallAfterMs: 60_000, secretName: 'queen-raft' })).toEqual({ phase: 'Degraded', message: NAMED, reason: 'node-down' });
    // The pod the operation stopped stays Terminating there: its successor cannot come.
    pod(obs, 1).terminating = true;
    expect(podStartProblem(pod(obs, 1))).toBe(NAMED);
    expect(stopGate({ obs, memory: {}, target: 2, opts })).toEqual({ gate: 'node-down', reason: NAMED });
    expect(notReadyAndLive(obs, 1)).toBe(NAMED);
  });

  it('is named while the node controller has not marked the pod yet, once the Node says so', () => {
    const obs = stopped();
    pod(obs, 1).ready = true; // the kubelet's last word
    expect(stopGate({ obs, memory: {}, target: 2, opts })).toEqual({ gate: 'node-down', reason: NAMED });
    pod(obs, 1).nodeDown = null; // the node not yet marked Unknown: only the broker's side is known
    expect(stopGate({ obs, memory: {}, target: 2, opts })).toEqual({ gate: 'voter-live', reason: 'the leader has not heard from node 2' });
  });

  it('is no verdict on a new version: the progress deadline and the canary wait for the node', () => {
    const obs = stopped();
    for (const p of obs.pods) p.hash = p.ordinal === 1 ? 'new' : 'old';
    const watch = { ordinal: 1, since: T0 - 60_000 };
    expect(newVersionFailure({ obs, version: '2.6.1', watch, deadlineMs: 30_000 })).toBeNull();
    pod(obs, 1).nodeDown = null;
    expect(newVersionFailure({ obs, version: '2.6.1', watch, deadlineMs: 30_000 })).toBe('pod 1 did not become Ready and live on 2.6.1 within 30s: pod 1 is not Ready');

    const canary = stopped();
    const start = { ordinal: 1, uid: pod(canary, 1).uid, restarts: 0 };
    expect(canaryProblem(canary, start, 100)).toEqual({ reason: NAMED, fatal: false, waits: true });
    pod(canary, 1).nodeDown = null;
    expect(canaryProblem(canary, start, 100)).toEqual({ reason: 'pod 1 is not Ready', fatal: true });
  });

  it('is named when a membership change waits for a quorum (the leader answers busy), unless it is the node the change is about', () => {
    const obs = stopped();
    expect(voterNodeDownProblem(obs, 1)).toBe(NAMED);
    expect(voterNodeDownProblem(obs, 2)).toBeNull();
    pod(obs, 1).nodeDown = null;
    expect(voterNodeDownProblem(obs, 1)).toBeNull();
  });
});

describe('the end of a replacement: its pod a Ready voter again', () => {
  it('names the node its pod is on when that node stopped reporting (soak seed 56819, #1)', () => {
    expect(replacedVoterWait(stopped(), 1, 2)).toBe(`waiting for pod 1 to be a Ready voter: ${NAMED}`);
    const learner = stopped();
    setMember(learner, { ...member(2, false, 40), live: false });
    expect(replacedVoterWait(learner, 1, 2)).toBe(`waiting for pod 1 to be a Ready voter: ${NAMED}`);
  });

  it('says what is missing otherwise, and nothing once the pod is a Ready, live voter', () => {
    const obs = cluster(3, 3, 1);
    expect(replacedVoterWait(obs, 1, 2)).toBeNull();
    pod(obs, 1).ready = false;
    expect(replacedVoterWait(obs, 1, 2)).toBe('waiting for pod 1 to be a Ready voter: pod 1 is not Ready');
    setMember(obs, member(2, false, 0));
    expect(replacedVoterWait(obs, 1, 2)).toBe('waiting for pod 1 to be a Ready voter: node 2 is not a voter yet');
  });
});
