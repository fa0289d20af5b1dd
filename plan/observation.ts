import type { LinkObservation } from './link.ts';

// What the operator knows about a cluster at one instant: its pods, claims and StatefulSet as the
// API server has them, and each node's /health and the leader's membership view as the brokers
// answer. Plain data, so the planning rules are pure functions of it (and of the clock).

export interface PodObservation {
  ordinal: number;
  name: string;
  uid: string;
  terminating: boolean;
  phase: string;
  /** The broker container is running. */
  running: boolean;
  ready: boolean;
  /** When the Ready condition last turned True (ms since the epoch), if it is True. */
  readySince: number | null;
  /**
   * Its serving label (queenmq.com/serving): true while the client Services may send it
   * connections, false while the operator drains it, null on a pod made before the label existed.
   */
  serving: boolean | null;
  /** The template hash the pod was made from (queenmq.com/config-hash). */
  hash: string | null;
  image: string | null;
  ip: string | null;
  restarts: number;
  lastExitCode: number | null;
  /** When the container last terminated (ms), if it ever did. */
  lastExitAt: number | null;
  /** Why the container is waiting (CrashLoopBackOff, CreateContainerConfigError, ...), and the kubelet's message. */
  waitingReason: string | null;
  waitingMessage: string | null;
  /** The pod cannot be scheduled, and the scheduler's message. */
  unschedulable: string | null;
  /**
   * No scheduler has looked at the pod for a while (no node, no PodScheduled condition): what
   * waits, in words (`no scheduler has placed it for 45s`). Nothing about its spec or version.
   */
  notPlaced: string | null;
  /** When it was placed on its node (PodScheduled True), in ms. */
  scheduledAt: number | null;
  /** The node it was scheduled to (spec.nodeName). */
  node: string | null;
  /**
   * That node does not report as Ready, when the operator may read nodes and looked (it looks
   * only for a pod that is not Ready, not running, stopping or not answering).
   */
  nodeDown: NodeDown | null;
}

/** A node whose Ready condition is not True: Unknown when its kubelet stopped reporting. */
export interface NodeDown {
  node: string;
  ready: 'Unknown' | 'False';
  /** When the condition last changed (ms since the epoch). */
  since: number | null;
  message: string | null;
}

export interface ClaimObservation {
  ordinal: number;
  name: string;
  uid: string;
  terminating: boolean;
  /** spec.resources.requests.storage and status.capacity.storage, in bytes (capacity 0 when unbound). */
  requestBytes: number;
  capacityBytes: number;
  request: string;
  resizePending: boolean;
  /** Since when the file system has waited for the node (FileSystemResizePending), in ms. */
  resizePendingSince?: number | null;
  /** The resizer's error (ControllerResizeError / NodeResizeError), while it tries again or after it gave up. */
  resizeError?: string | null;
  /** The storage refused the size for good (ControllerResizeInfeasible / NodeResizeInfeasible). */
  resizeInfeasible?: boolean;
  /**
   * When the node last tried to grow the mounted file system and could not (a NodeResizeError while
   * FileSystemResizePending), in ms: only the pod's restart finishes that growth.
   */
  onlineGrowthFailedAt?: number | null;
}

export interface HealthObservation {
  /** The HTTP status of /health (200 healthy, 503 settling). */
  status: number;
  healthy: boolean;
  role: string;
  leaderKnown: boolean;
  term: number;
  applied: number;
  commit: number;
  lag: number;
  quorumAckMs: number | null;
  version: string;
  applyFailure: Record<string, unknown> | null;
  /** The cluster's committed catalogue version as this node applied it (raft.clusterVersion); null when not said. */
  clusterVersion?: number | null;
  /** The highest catalogue version this node's build reads (raft.kinds); null when not said. */
  kinds?: number | null;
}

export interface MemberObservation {
  nodeId: number;
  voter: boolean;
  raft: string | null;
  http: string | null;
  matched: number | null;
  lag: number | null;
  lastAckMs: number | null;
  live: boolean;
  /** The catalogue version the member's build said it reads, as the leader heard it; null when not said. */
  kinds?: number | null;
}

export interface MembershipObservation {
  /** The node whose view this is, and where it came from (leader / follower / stopped). */
  nodeId: number;
  source: string;
  viewAgeMs: number | null;
  leader: number | null;
  term: number;
  voters: number[];
  learners: number[];
  joint: number[][] | null;
  membershipIndex: number | null;
  changeInFlight: boolean;
  lastLogIndex: number | null;
  committedIndex: number | null;
  liveWithinMs: number | null;
  promoteMaxLag: number;
  members: MemberObservation[];
}

export interface StatefulSetObservation {
  uid: string;
  replicas: number;
  terminating: boolean;
  /** The hash on its pod template, and its spec hash annotation. */
  templateHash: string | null;
  specHash: string | null;
  claimTemplateSize: string | null;
  /** Controlled by this QueenCluster (owner reference with its uid). */
  ours: boolean;
}

export interface Observation {
  /** When it was taken (ms since the epoch). */
  at: number;
  namespace: string;
  name: string;
  /** Voters wanted (spec.replicas) and spec.minReadySeconds. */
  voters: number;
  minReadySeconds: number;
  /** The template hash the pods should carry, from the spec as it is now. */
  wantedHash: string;
  /** The tag of the image the spec asks for (none for an image pinned by digest alone). */
  wantedVersion?: string | null;
  statefulSet: StatefulSetObservation | null;
  /** The client and headless Services exist (and are not being deleted). */
  servicesPresent: boolean;
  /** Pods and claims of this cluster by ordinal, whatever the StatefulSet's count. */
  pods: PodObservation[];
  claims: ClaimObservation[];
  /** /health answers by ordinal: absent when the pod is not running or did not answer. */
  health: Record<number, HealthObservation>;
  /** The freshest leader view of the membership, if any pod gave one. */
  membership: MembershipObservation | null;
  /** The ordinal of the pod that gave it. */
  membershipVia: number | null;
  /**
   * Why the brokers refuse the operator on their system routes (JWT_ENABLED: no token, a token
   * refused, a Secret that cannot be read), in one line; null or absent when they do not.
   */
  brokerAuth?: string | null;
  /**
   * The cluster link as the leader says it (GET /api/v1/system/link), read only for a cluster with
   * spec.standby or spec.link: absent otherwise, null when no leader answered.
   */
  link?: LinkObservation | null;
}

// The one place a pod, a claim or a member is looked up by its pod ordinal or node id. A node's id
// is its pod's ordinal + 1 (queen-0 is node 1), fixed at formation by the StatefulSet's order.

/** The pod of an ordinal, Terminating or not. */
export const podAt = (obs: Observation, ordinal: number) => obs.pods.find((p) => p.ordinal === ordinal);
/** The pod of an ordinal that is not Terminating. */
export const livePodAt = (obs: Observation, ordinal: number) => obs.pods.find((p) => p.ordinal === ordinal && !p.terminating);
/** The claim of an ordinal, being deleted or not. */
export const claimAt = (obs: Observation, ordinal: number) => obs.claims.find((c) => c.ordinal === ordinal);
/** The claim of an ordinal that is not being deleted: the one its pod mounts next. */
export const liveClaimAt = (obs: Observation, ordinal: number) => obs.claims.find((c) => c.ordinal === ordinal && !c.terminating);
/** The member of a node id in a membership view. */
export const memberOf = (m: MembershipObservation | null | undefined, nodeId: number) => m?.members.find((x) => x.nodeId === nodeId);
