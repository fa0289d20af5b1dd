// The cluster's own disruption budget, short only of pods whose nodes left the membership
// (plan/budget.ts): a scale from 5 to 3 voters, node 5 removed and its pod not Ready, node 4
// elected leader. Node 4's pod must stop once to hand leadership away before its removal; the gate
// lets it, the budget would not, for good.
import { describe, expect, it } from 'vitest';
import { nonMembersHoldingBudget } from '../../plan/budget.ts';
import { stopGate } from '../../plan/gates.ts';
import { cluster, pod } from './fixture.ts';

/** Five pods; voters 1 to 4, node 4 leads; node 5 left the membership and its pod is not Ready. */
function nodeFiveLeft() {
  const obs = cluster(5, 4, 4);
  Object.assign(pod(obs, 4), { ready: false, readySince: null });
  return obs;
}

describe('a budget short only of pods whose nodes left the membership', () => {
  it('names them, and the stop gate lets the leaving leader go', () => {
    const obs = nodeFiveLeft();
    expect(stopGate({ obs, memory: {}, target: 3, removing: true, opts: { minReadyMs: 30_000, stallAfterMs: 10_000, caughtUpEntries: 1000 } })).toBeNull();
    expect(nonMembersHoldingBudget(obs, 3)).toEqual([4]);
  });

  it('a terminating pod of a node that left counts as well', () => {
    const obs = nodeFiveLeft();
    Object.assign(pod(obs, 4), { ready: true, terminating: true });
    expect(nonMembersHoldingBudget(obs, 3)).toEqual([4]);
  });

  it("a member's pod that is not Ready, or missing, is the budget's to count: none", () => {
    const notReady = nodeFiveLeft();
    Object.assign(pod(notReady, 1), { ready: false, readySince: null });
    expect(nonMembersHoldingBudget(notReady, 3)).toBeNull();
    const missing = nodeFiveLeft();
    missing.pods = missing.pods.filter((p) => p.ordinal !== 2);
    expect(nonMembersHoldingBudget(missing, 3)).toBeNull();
  });

  it('a learner is a member: its pod not Ready is not waived', () => {
    const obs = nodeFiveLeft();
    obs.membership!.learners = [5];
    expect(nonMembersHoldingBudget(obs, 3)).toBeNull();
  });

  it('every pod Ready (the refusal is for another reason), or no leader view: none', () => {
    expect(nonMembersHoldingBudget(cluster(5, 4, 4), 3)).toBeNull();
    const unknown = nodeFiveLeft();
    unknown.membership = null;
    expect(nonMembersHoldingBudget(unknown, 3)).toBeNull();
  });
});
