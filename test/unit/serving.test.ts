// Which pods the operator puts back in the client Services when no step drains one
// (plan/serving.ts): a member's pod that a removal drained and that stays, and a pod made
// before the serving label; never a pod whose node left, nor one that terminates, nor any pod while
// no leader tells who is a member, nor, during a scale-down, the pods of the nodes it removes.
import { describe, expect, it } from 'vitest';
import { podsToServe } from '../../plan/serving.ts';
import { cluster } from './fixture.ts';

const ordinals = (obs: ReturnType<typeof cluster>) => podsToServe(obs).map((p) => p.ordinal);

describe('podsToServe', () => {
  it('leaves every pod alone when all serve', () => {
    expect(ordinals(cluster(3, 3, 1))).toEqual([]);
  });

  it('puts back a drained pod whose node is still a member (the removal did not happen)', () => {
    const obs = cluster(3, 3, 1);
    obs.pods[2]!.serving = false;
    expect(ordinals(obs)).toEqual([2]);
  });

  it('keeps out a drained pod whose node left the membership', () => {
    const obs = cluster(5, 4, 1);
    obs.pods[4]!.serving = false;
    expect(ordinals(obs)).toEqual([]);
  });

  it('keeps out a drained pod that terminates', () => {
    const obs = cluster(3, 3, 1);
    obs.pods[2]!.serving = false;
    obs.pods[2]!.terminating = true;
    expect(ordinals(obs)).toEqual([]);
  });

  it('labels a pod made before the serving label, member or not', () => {
    const obs = cluster(4, 3, 1);
    obs.pods[1]!.serving = null;
    obs.pods[3]!.serving = null;
    expect(ordinals(obs)).toEqual([1, 3]);
  });

  it('leaves a drained pod as it is while no leader tells who is a member', () => {
    const obs = cluster(3, 3, 1);
    obs.pods[2]!.serving = false;
    obs.membership = null;
    expect(ordinals(obs)).toEqual([]);
  });

  it('during a scale-down keeps out the drained pods of the nodes it removes, and puts back the others', () => {
    // 5 → 3: node 5 left; the pods of nodes 4 and 5 were drained together; pod 1 was drained for a
    // removal that did not happen.
    const obs = cluster(5, 4, 1);
    for (const o of [1, 3, 4]) obs.pods[o]!.serving = false;
    expect(podsToServe(obs, 3).map((p) => p.ordinal)).toEqual([1]);
    // The target raised back to 5: node 4 stays, its pod serves again.
    expect(podsToServe(obs, 5).map((p) => p.ordinal)).toEqual([1, 3]);
    // Without a scale-down (the observer, no operation): every member's pod.
    expect(ordinals(obs)).toEqual([1, 3]);
  });
});
