// Which pods the operator puts back in the client Services when no step drains one
// (plan/serving.ts): a member's pod that a removal drained and that stays, and a pod made
// before the serving label; never a pod whose node left, nor one that terminates, nor any pod while
// no leader tells who is a member.
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
});
