// A wait held by a membership change in flight looks again soon while the change is young (it
// commits within a heartbeat or two), and at its poll once it has not committed for a while (no
// quorum, a joint configuration left behind): not seven looks a second for minutes.
import { expect, it } from 'vitest';
import { inFlightLookAgainAt } from '../../activities/membership.ts';
import type { MembershipObservation } from '../../plan/observation.ts';
import { CHANGE_IN_FLIGHT_FAST_MS, CHANGE_IN_FLIGHT_LOOK_MS, changeInFlightLookAgainAt } from '../../plan/voters.ts';

it('a young change is looked at again in CHANGE_IN_FLIGHT_LOOK_MS; an old one at the poll', () => {
  expect(changeInFlightLookAgainAt(10_000, 10_000)).toBe(10_000 + CHANGE_IN_FLIGHT_LOOK_MS);
  expect(changeInFlightLookAgainAt(10_000 + CHANGE_IN_FLIGHT_FAST_MS - 1, 10_000)).toBe(10_000 + CHANGE_IN_FLIGHT_FAST_MS - 1 + CHANGE_IN_FLIGHT_LOOK_MS);
  expect(changeInFlightLookAgainAt(10_000 + CHANGE_IN_FLIGHT_FAST_MS, 10_000)).toBeUndefined();
});

it("a change is young from when this process first saw its entry; the next change's entry is young again", () => {
  const m = (membershipIndex: number) => ({ membershipIndex, changeInFlight: true, joint: null }) as unknown as MembershipObservation;
  const t = 1_000_000;
  expect(inFlightLookAgainAt('uid-a', m(7), t)).toBe(t + CHANGE_IN_FLIGHT_LOOK_MS);
  expect(inFlightLookAgainAt('uid-a', m(7), t + 1000)).toBe(t + 1000 + CHANGE_IN_FLIGHT_LOOK_MS);
  // Still entry 7 after the fast spell: the poll.
  expect(inFlightLookAgainAt('uid-a', m(7), t + CHANGE_IN_FLIGHT_FAST_MS + 1)).toBeUndefined();
  // Another cluster, and the next change of this one, are young.
  expect(inFlightLookAgainAt('uid-b', m(7), t + CHANGE_IN_FLIGHT_FAST_MS + 1)).toBe(t + CHANGE_IN_FLIGHT_FAST_MS + 1 + CHANGE_IN_FLIGHT_LOOK_MS);
  expect(inFlightLookAgainAt('uid-a', m(8), t + CHANGE_IN_FLIGHT_FAST_MS + 2)).toBe(t + CHANGE_IN_FLIGHT_FAST_MS + 2 + CHANGE_IN_FLIGHT_LOOK_MS);
});
