// An observation of a cluster for the planning rules' table tests: `cluster(pods, voters, leader)`
// as the reference operator's tests build it. Every pod exists, runs and has been Ready for an
// hour on the wanted template; nodes 1..voters are live voters, 5000 entries matched, lag 0.
import type { MemberObservation, Observation, PodObservation } from '../../plan/observation.ts';
import type { StallMemory } from '../../plan/stalls.ts';

export const T0 = Date.parse('2026-11-29T12:00:00Z');

export function cluster(pods: number, voters: number, leader: number): Observation {
  const podObs: PodObservation[] = [];
  for (let i = 0; i < pods; i++) {
    podObs.push({
      ordinal: i,
      name: `queen-${i}`,
      uid: `uid-${i}`,
      terminating: false,
      phase: 'Running',
      running: true,
      ready: true,
      readySince: T0 - 3600_000,
      serving: true,
      hash: 'new',
      image: 'ghcr.io/queen-mq/queen:2.6.0',
      ip: `127.1.0.${i + 1}`,
      restarts: 0,
      lastExitCode: null,
      lastExitAt: null,
      waitingReason: null,
      waitingMessage: null,
      unschedulable: null,
      notPlaced: null,
      scheduledAt: null,
      node: `node-${i % 3}`,
      nodeDown: null,
    });
  }
  const members: MemberObservation[] = [];
  for (let id = 1; id <= voters; id++) members.push(member(id, true, 0));
  const health: Observation['health'] = {};
  for (let i = 0; i < pods; i++) {
    health[i] = {
      status: 200,
      healthy: true,
      role: i + 1 === leader ? 'leader' : 'follower',
      leaderKnown: true,
      term: 3,
      applied: 5000,
      commit: 5000,
      lag: 0,
      quorumAckMs: 40,
      version: '2.6.0',
      applyFailure: null,
    };
  }
  return {
    at: T0,
    namespace: 'queen',
    name: 'queen',
    voters,
    minReadySeconds: 30,
    wantedHash: 'new',
    statefulSet: { uid: 'sts', replicas: pods, terminating: false, templateHash: 'new', specHash: 'spec', claimTemplateSize: '50Gi', ours: true },
    servicesPresent: true,
    pods: podObs,
    claims: podObs.map((p) => ({
      ordinal: p.ordinal,
      name: `data-queen-${p.ordinal}`,
      uid: `claim-${String.fromCharCode(97 + p.ordinal)}`,
      terminating: false,
      request: '50Gi',
      requestBytes: 50 * 1024 ** 3,
      capacityBytes: 50 * 1024 ** 3,
      resizePending: false,
    })),
    health,
    membership: {
      nodeId: leader,
      source: 'leader',
      viewAgeMs: 0,
      leader,
      term: 3,
      voters: Array.from({ length: voters }, (_, i) => i + 1),
      learners: [],
      joint: null,
      membershipIndex: 10,
      changeInFlight: false,
      lastLogIndex: 5000,
      committedIndex: 5000,
      liveWithinMs: 2000,
      promoteMaxLag: 1000,
      members,
    },
    membershipVia: leader - 1,
  };
}

/** A live member `lag` entries behind (matched = 5000 - lag). */
export function member(nodeId: number, voter: boolean, lag: number | null): MemberObservation {
  return {
    nodeId,
    voter,
    raft: `queen-${nodeId - 1}.h:7400`,
    http: `queen-${nodeId - 1}.h:6632`,
    matched: lag === null ? null : 5000 - lag,
    lag,
    lastAckMs: 10,
    live: true,
  };
}

export function setMember(obs: Observation, m: MemberObservation): void {
  const list = obs.membership!.members;
  const i = list.findIndex((x) => x.nodeId === m.nodeId);
  if (i >= 0) list[i] = m;
  else list.push(m);
}

export const pod = (obs: Observation, ordinal: number) => obs.pods.find((p) => p.ordinal === ordinal)!;

/** A stall memory in which node `id` has been at its current `matched` since `since`. */
export function stalledSince(obs: Observation, id: number, since: number): StallMemory {
  const m = obs.membership!.members.find((x) => x.nodeId === id)!;
  return { [String(id)]: { matched: m.matched, since } };
}
