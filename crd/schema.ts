// The QueenCluster API (queenmq.com/v1alpha1): the one source of truth for the CRD written to
// deploy/ (crd/generate.ts) and for the TypeScript types the operator uses (below).
import type { FromSchema } from './schema-types.ts';
import { annotationMap, env, imagePullSecrets, labelMap, nodeSelector, priorityClassName, resources, subdomainRule, tolerations } from './embedded.ts';
import { QUANTITY_LIMIT, QUANTITY_PATTERN } from './quantity.ts';
import { fenceStatusSchema, linkSpecSchema, secretKey, roleStatusSchema, standbysStatusSchema, standbySpecSchema, standbyStatusSchema } from './link.ts';

export const GROUP = 'queenmq.com';
export const VERSION = 'v1alpha1';
export const KIND = 'QueenCluster';
export const PLURAL = 'queenclusters';
export const API_VERSION = `${GROUP}/${VERSION}`;

const port = (description: string, dflt: number) =>
  ({ type: 'integer', format: 'int32', minimum: 1, maximum: 65535, default: dflt, description }) as const;

/**
 * An image repository as a container runtime reads it (the distribution reference grammar): an
 * optional registry host[:port], then lower-case path components. The tag is spec.version.
 */
const REPOSITORY =
  '([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?([.][a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?' +
  '[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*';
/** A digest that pins the image: the repository, then :<tag> if wanted, then @sha256:<64 hex digits>. */
const DIGEST = '(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[a-f0-9]{64}';
export const IMAGE_PATTERN = `^${REPOSITORY}(${DIGEST})?$`;

/**
 * A cron expression as a Temporal Schedule takes it: five fields (minute, hour, day of month,
 * month, day of week), or one of @yearly, @monthly, @weekly, @daily, @hourly.
 */
export const CRON_PATTERN = '^(@(yearly|annually|monthly|weekly|daily|hourly)|([0-9A-Za-z*/,?-]+[ ]+){4}[0-9A-Za-z*/,?-]+)$';

/** Backups of the cluster: VolumeSnapshots of one voter's volume, each a QueenBackup (crd/backup.ts). */
const backupSchema = {
  type: 'object',
  description:
    'Scheduled backups: a Temporal Schedule takes a QueenBackup (a VolumeSnapshot of a caught-up voter\'s volume) at each time ' +
    'of schedule and keeps the newest keep of them. A backup on demand: the queenmq.com/backup annotation.',
  properties: {
    schedule: {
      type: 'string',
      maxLength: 128,
      description: 'When to take a backup, as a cron expression in UTC, such as "0 */6 * * *" (every six hours) or @daily. Unset: no Schedule.',
      'x-kubernetes-validations': [
        {
          rule: `self.matches('${CRON_PATTERN}')`,
          message: 'must be a cron expression of five fields (minute hour day-of-month month day-of-week), such as "0 */6 * * *", or @hourly, @daily, @weekly, @monthly',
        },
      ],
    },
    keep: {
      type: 'integer',
      format: 'int32',
      minimum: 1,
      maximum: 1000,
      default: 7,
      description: 'How many ready backups the Schedule keeps: after each one it takes, it deletes its oldest beyond this number.',
    },
    volumeSnapshotClassName: {
      type: 'string',
      minLength: 1,
      maxLength: 253,
      'x-kubernetes-validations': [subdomainRule('a VolumeSnapshotClass name')],
      description: 'The VolumeSnapshotClass of the snapshots; the default class of the claims\' CSI driver when unset.',
    },
    deleteWithCluster: {
      type: 'boolean',
      default: false,
      description: 'true: the backups taken while it is true are deleted with the QueenCluster (it owns them). false: they outlive it.',
    },
  },
} as const;

/** How a new cluster forms: from nothing (the default), or from a backup. */
const bootstrapSchema = {
  type: 'object',
  description: 'How the cluster first forms. Read once, at its first formation; fixed afterwards.',
  properties: {
    fromBackup: {
      type: 'object',
      description:
        'Form the cluster from a backup of this namespace: pod 0 starts on a claim made from its snapshot, recovered as a cluster ' +
        'of one (QUEEN_RAFT_FORCE_RECOVER), then the other voters join it as learners and are promoted. The source is only read.',
      properties: {
        name: {
          type: 'string',
          minLength: 1,
          maxLength: 253,
          'x-kubernetes-validations': [subdomainRule('a QueenBackup name')],
          description: 'A QueenBackup of this namespace (kubectl get queenbackups).',
        },
        volumeSnapshot: {
          type: 'string',
          minLength: 1,
          maxLength: 253,
          'x-kubernetes-validations': [subdomainRule('a VolumeSnapshot name')],
          description: 'A VolumeSnapshot of this namespace holding a Queen node\'s volume, taken some other way.',
        },
      },
      'x-kubernetes-validations': [
        { rule: 'has(self.name) != has(self.volumeSnapshot)', message: 'fromBackup names a QueenBackup (name) or a VolumeSnapshot (volumeSnapshot): one of the two' },
      ],
    },
  },
} as const;

export const specSchema = {
  type: 'object',
  required: ['version', 'secretName'],
  description: 'The cluster wanted: its version, its voters, its storage and the settings of its pods.',
  properties: {
    version: {
      type: 'string',
      minLength: 1,
      maxLength: 128,
      pattern: '^[A-Za-z0-9_][A-Za-z0-9_.-]*$',
      description: 'Broker version: the image tag. Changing it rolls the pods one at a time, the leader last.',
    },
    image: {
      type: 'string',
      minLength: 1,
      maxLength: 512,
      default: 'ghcr.io/queen-mq/queen',
      description:
        'Image repository; the image is <image>:<version>. To pin the image by digest: <image>@sha256:<digest>, or ' +
        '<image>:<version>@sha256:<digest>; version still names the version the brokers run, and a new digest rolls the pods.',
      'x-kubernetes-validations': [
        {
          rule: `self.matches('${IMAGE_PATTERN}')`,
          message:
            'must be an image repository such as ghcr.io/queen-mq/queen (the tag is spec.version), optionally pinned ' +
            'by digest: ghcr.io/queen-mq/queen@sha256:<64 hex digits> or ghcr.io/queen-mq/queen:<version>@sha256:<64 hex digits>',
        },
      ],
    },
    imagePullPolicy: { type: 'string', enum: ['Always', 'IfNotPresent', 'Never'], default: 'IfNotPresent', description: "The broker container's image pull policy." },
    imagePullSecrets,
    replicas: {
      type: 'integer',
      format: 'int32',
      enum: [1, 3, 5],
      default: 3,
      description: 'Number of voters: 1, 3 or 5. Changed through the membership API, learners first.',
    },
    secretName: {
      type: 'string',
      minLength: 1,
      maxLength: 253,
      'x-kubernetes-validations': [subdomainRule('a Secret name')],
      description:
        'Secret in the same namespace with QUEEN_RAFT_TOKEN (required), QUEEN_ENCRYPTION_KEY, and ' +
        'QUEEN_PROXY_JWT_SECRET when the proxy is on, QUEEN_TOKEN for Kafka with more than one voter.',
    },
    storage: {
      type: 'object',
      default: {},
      description: 'One volume claim per pod, data-<name>-<ordinal>. Volumes grow, never shrink.',
      properties: {
        size: {
          type: 'string',
          maxLength: 32,
          default: '50Gi',
          'x-kubernetes-validations': [
            {
              rule:
                `self.matches('${QUANTITY_PATTERN}') && isQuantity(self) && quantity(self).isGreaterThan(quantity('0')) && ` +
                `quantity(self).isLessThan(quantity('${QUANTITY_LIMIT}'))`,
              message: 'must be a positive quantity such as 50Gi, 500G or 1e11 (below 8Ei)',
            },
          ],
          description: 'Size of each volume. Raising it grows every claim; lowering it is refused.',
        },
        storageClassName: {
          type: 'string',
          minLength: 1,
          maxLength: 253,
          'x-kubernetes-validations': [subdomainRule('a StorageClass name')],
          description: 'StorageClass of the claims; the cluster default when unset. Fixed at creation.',
        },
      },
    },
    adminTokenSecret: secretKey(
      'For brokers run with JWT_ENABLED=true: a Secret key in the same namespace holding a bearer token with the Admin role, which ' +
        'the operator sends on the membership API. The operator reads it with get on that one Secret: grant it that (see the README).',
    ),
    networkPolicy: {
      type: 'object',
      default: {},
      description:
        'A NetworkPolicy for the pods: the raft port from the cluster\'s own pods only; the broker port from them, from the ' +
        "operator's namespace and from pods labelled queenmq.com/client=true in any namespace; the proxy and Kafka ports from anywhere.",
      properties: {
        enabled: { type: 'boolean', default: true, description: 'false: no NetworkPolicy (an existing one is deleted).' },
      },
    },
    resources: {
      ...resources,
      description:
        'Resources of the broker container; default requests cpu 1 and memory 4Gi, limit memory 4Gi, no CPU limit.',
    },
    podAntiAffinity: {
      type: 'string',
      enum: ['required', 'preferred'],
      default: 'required',
      description: 'Whether two pods of the cluster may share a node: required (never) or preferred (only when no other node fits).',
    },
    zoneSpread: {
      type: 'string',
      enum: ['ScheduleAnyway', 'DoNotSchedule'],
      default: 'ScheduleAnyway',
      description: 'Spreading the pods over zones (topology.kubernetes.io/zone, at most one apart): ScheduleAnyway prefers it, DoNotSchedule requires it.',
    },
    nodeSelector,
    tolerations,
    priorityClassName,
    proxy: {
      type: 'object',
      default: {},
      description: 'The embedded proxy (tenants and API keys) on a port and a Service of its own.',
      properties: {
        enabled: { type: 'boolean', default: false, description: 'Run the proxy in each pod.' },
        port: port('Proxy port.', 6711),
        publicUrl: { type: 'string', description: 'URL for OAuth callbacks and sessions.' },
      },
    },
    kafka: {
      type: 'object',
      default: {},
      description: 'The Kafka facade.',
      properties: {
        enabled: { type: 'boolean', default: false, description: 'Run the Kafka facade in each pod.' },
        port: port('Kafka port.', 9092),
      },
    },
    env,
    podLabels: { ...labelMap, description: 'Labels added to the pods (the operator keeps its own).' },
    podAnnotations: { ...annotationMap, description: 'Annotations added to the pods.' },
    port: port('Broker HTTP port. Part of the peer addresses: fixed at creation.', 6632),
    raftPort: port('Raft port. Part of the peer addresses: fixed at creation.', 7400),
    clusterDomain: {
      type: 'string',
      minLength: 1,
      maxLength: 253,
      'x-kubernetes-validations': [subdomainRule('a cluster domain')],
      default: 'cluster.local',
      description: 'Cluster DNS domain. Part of the peer addresses: fixed at creation.',
    },
    upgrade: {
      type: 'object',
      default: {},
      description: 'How a rolling upgrade goes.',
      properties: {
        approval: {
          type: 'string',
          enum: ['Automatic', 'Manual'],
          default: 'Automatic',
          description:
            'Manual: the upgrade restarts every pod that does not lead, then waits before the leader until the ' +
            'queenmq.com/approve annotation names the upgrade\'s version.',
        },
        onFailure: {
          type: 'string',
          enum: ['Hold', 'Rollback'],
          default: 'Hold',
          description:
            'What the upgrade does when a pod on the new version crash-loops, does not become Ready and live within ' +
            'progressDeadlineSeconds, or fails its canary: Hold (wait for a person) or Rollback (the pods already moved go ' +
            'back to the previous pod template one at a time, through the same stop gate, the leader last; the status then ' +
            'says RolledBack, and that spec is not tried again until it changes or queenmq.com/retry asks).',
        },
        progressDeadlineSeconds: {
          type: 'integer',
          format: 'int32',
          minimum: 10,
          maximum: 86400,
          default: 600,
          description: 'How long a restarted pod has to become Ready and live on the new version before the upgrade counts as failed.',
        },
        finalize: {
          type: 'string',
          enum: ['Auto', 'Manual'],
          default: 'Auto',
          description:
            'Auto: once every pod runs a version whose build reads a newer catalogue version, the leader raises the cluster to it, ' +
            'and from then on no older version can start (the way back is closed). Manual: the pods run with ' +
            'QUEEN_RAFT_CLUSTER_VERSION_MS=0, so the cluster stays where it is and the way back stays open, until the ' +
            'queenmq.com/finalize annotation names the version (its pods then restart once, one at a time, without it).',
        },
        canarySeconds: {
          type: 'integer',
          format: 'int32',
          minimum: 0,
          maximum: 86400,
          default: 0,
          description:
            'After the first pod runs the new version, the upgrade holds this long while it keeps checking that pod (Ready, ' +
            'live, caught up, a write committing through it) before the next pod moves; a failure in that window is a failed ' +
            'upgrade (see onFailure). 0: no canary.',
        },
      },
    },
    backup: backupSchema,
    bootstrap: bootstrapSchema,
    minReadySeconds: {
      type: 'integer',
      format: 'int32',
      minimum: 0,
      default: 30,
      description: 'How long every other voter must have been Ready before a pod is stopped.',
    },
    terminationGracePeriodSeconds: {
      type: 'integer',
      format: 'int64',
      minimum: 1,
      default: 90,
      description: 'Grace period of the pods; covers the broker shutdown sequence.',
    },
    link: linkSpecSchema,
    standby: standbySpecSchema,
  },
  'x-kubernetes-validations': [
    {
      rule: "!self.image.matches(':[A-Za-z0-9_][A-Za-z0-9_.-]*@') || self.image.contains(':' + self.version + '@')",
      message: 'the tag in image, before its digest, must be spec.version: the brokers report the version, and the status shows it',
      fieldPath: '.image',
    },
    { rule: 'self.port != self.raftPort', message: 'port and raftPort must differ', fieldPath: '.raftPort' },
    {
      rule: 'self.port == oldSelf.port',
      message: 'port is part of the peer addresses and cannot change',
      fieldPath: '.port',
    },
    {
      rule: 'self.raftPort == oldSelf.raftPort',
      message: 'raftPort is part of the peer addresses and cannot change',
      fieldPath: '.raftPort',
    },
    {
      rule: 'self.clusterDomain == oldSelf.clusterDomain',
      message: 'clusterDomain is part of the peer addresses and cannot change',
      fieldPath: '.clusterDomain',
    },
    {
      rule:
        'has(self.storage.storageClassName) == has(oldSelf.storage.storageClassName) && ' +
        '(!has(self.storage.storageClassName) || self.storage.storageClassName == oldSelf.storage.storageClassName)',
      message: 'storageClassName cannot be set, changed or removed after creation: the claims keep the class they were made with',
      fieldPath: '.storage.storageClassName',
    },
    {
      rule: 'has(self.bootstrap) == has(oldSelf.bootstrap) && (!has(self.bootstrap) || self.bootstrap == oldSelf.bootstrap)',
      message: 'bootstrap is read once, when the cluster first forms: it cannot be set, changed or removed afterwards',
      fieldPath: '.bootstrap',
    },
    {
      rule:
        '!isQuantity(self.storage.size) || !isQuantity(oldSelf.storage.size) || ' +
        'quantity(self.storage.size).compareTo(quantity(oldSelf.storage.size)) >= 0',
      message: 'storage.size cannot shrink: a volume only grows',
      fieldPath: '.storage.size',
    },
  ],
} as const;

const memberSchema = {
  type: 'object',
  required: ['nodeId', 'pod', 'voter', 'live', 'ready'],
  properties: {
    nodeId: { type: 'integer', format: 'int64' },
    pod: { type: 'string' },
    voter: { type: 'boolean' },
    learner: { type: 'boolean' },
    live: { type: 'boolean', description: 'The leader heard from the node within its liveness window.' },
    ready: { type: 'boolean' },
    lag: { type: 'integer', format: 'int64', nullable: true, description: 'Entries behind the leader.' },
    matched: { type: 'integer', format: 'int64', nullable: true, description: 'Last entry the leader knows it holds (written with any other change of status, and at least once a probe interval).' },
    behindSince: {
      type: 'string',
      format: 'date-time',
      nullable: true,
      description: 'Since when the node has been behind the leader without moving.',
    },
    version: { type: 'string' },
    kinds: {
      type: 'integer',
      format: 'int32',
      nullable: true,
      description: 'The catalogue version its build reads, as its broker reports it (/health raft.kinds).',
    },
    restarts: { type: 'integer', format: 'int32' },
    lastExitCode: { type: 'integer', format: 'int32', nullable: true },
  },
} as const;

const operationSchema = {
  type: 'object',
  required: ['type', 'workflowId'],
  properties: {
    type: { type: 'string', description: 'FormCluster, RollingUpgrade, ScaleVoters, ReplaceNode, GrowVolumes, PromoteStandby or Switchover.' },
    workflowId: { type: 'string' },
    runId: { type: 'string' },
    step: { type: 'string', description: 'The step running now, in the words of the step list.' },
    gate: { type: 'string', description: 'The named gate that holds the step back, if any.' },
    target: { type: 'string', description: 'What the operation works towards, e.g. the version.' },
    startedAt: { type: 'string', format: 'date-time' },
    yieldTo: {
      type: 'string',
      nullable: true,
      description: 'The more urgent operation this one yields to once the step that runs now has finished (a step is not stopped in its middle).',
    },
    parked: {
      type: 'object',
      nullable: true,
      description:
        'Set while the operation waits for a person (its gate is lifted by a change of the QueenCluster, or by something outside it): ' +
        'it holds no worker slot, and looks again when the QueenCluster or what it owns changes.',
      required: ['lift', 'since', 'token'],
      properties: {
        lift: {
          type: 'string',
          enum: ['person', 'outside'],
          description: 'person: a change of the QueenCluster lifts the gate; outside: something else (a Secret, a node, a StorageClass), so it also looks again now and then.',
        },
        since: { type: 'string', format: 'date-time', description: 'Since when it has waited on this gate.' },
        token: { type: 'string', description: 'What the QueenCluster and its objects were when it parked: the operator wakes it when they change.' },
      },
    },
  },
} as const;

/** How an operation ended. */
export const OPERATION_RESULTS = ['Succeeded', 'Failed', 'Cancelled', 'Yielded', 'RolledBack', 'Terminated'] as const;

const lastOperationSchema = {
  type: 'object',
  required: ['type', 'result'],
  properties: {
    type: { type: 'string' },
    workflowId: { type: 'string' },
    runId: { type: 'string' },
    result: {
      type: 'string',
      enum: OPERATION_RESULTS,
      description:
        'RolledBack: an upgrade that failed and put the pods it had moved back on the previous pod template. ' +
        'Terminated: its workflow was ended from outside (temporal workflow terminate, a reset, a timeout).',
    },
    message: { type: 'string' },
    target: { type: 'string' },
    fingerprint: { type: 'string', description: 'What the operation was started for; not restarted for the same one.' },
    retryToken: { type: 'string', description: 'Value of the queenmq.com/retry annotation when it started.' },
    startedAt: { type: 'string', format: 'date-time' },
    finishedAt: { type: 'string', format: 'date-time' },
  },
} as const;

/** What a rolling upgrade keeps so that it can go back, whatever happens to the operator meanwhile. */
const upgradeStatusSchema = {
  type: 'object',
  properties: {
    previous: {
      type: 'object',
      nullable: true,
      description:
        'The pod template every pod ran before the upgrade began, recorded before the first pod moved: where a rollback goes.',
      properties: {
        version: { type: 'string', description: 'The broker version of that template.' },
        image: { type: 'string' },
        templateHash: { type: 'string', description: 'Its hash (queenmq.com/config-hash on its pods).' },
        specHash: { type: 'string', description: 'The spec hash the StatefulSet carried with it.' },
        recordedAt: { type: 'string', format: 'date-time' },
        template: {
          type: 'object',
          'x-kubernetes-preserve-unknown-fields': true,
          description: 'The StatefulSet\'s pod template as it was.',
        },
      },
    },
    rollback: {
      type: 'object',
      nullable: true,
      description: 'A rollback under way: an operator that restarts in its middle finishes it.',
      properties: {
        reason: { type: 'string', description: 'Why the upgrade failed.' },
        failedVersion: { type: 'string', description: 'The version that failed.' },
        version: { type: 'string', description: 'The version the pods go back to.' },
        templateHash: { type: 'string', description: 'The pod template they go back to.' },
        fingerprint: { type: 'string', description: 'The request (spec) that failed.' },
        startedAt: { type: 'string', format: 'date-time' },
      },
    },
    held: {
      type: 'object',
      nullable: true,
      description:
        'A new version that failed under onFailure Hold, and waits for a person: the verdict stands, whatever the pods do ' +
        'and whatever happens to the operator, until spec.upgrade.onFailure becomes Rollback, spec.version or the image ' +
        'changes, or the queenmq.com/retry annotation changes (the version is tried again).',
      properties: {
        version: { type: 'string', description: 'The version that failed.' },
        image: { type: 'string', description: 'Its image.' },
        reason: { type: 'string', description: 'Why it failed.' },
        retryToken: { type: 'string', description: 'The queenmq.com/retry annotation when it failed.' },
        since: { type: 'string', format: 'date-time' },
      },
    },
    canary: {
      type: 'object',
      nullable: true,
      description: 'The canary soaking now: the pod, and when its soak began (an operator that restarts goes on with the time left).',
      properties: {
        ordinal: { type: 'integer', format: 'int32' },
        podUid: { type: 'string' },
        version: { type: 'string' },
        startedAt: { type: 'string', format: 'date-time' },
        seconds: { type: 'integer', format: 'int32' },
      },
    },
  },
} as const;

const planStepSchema = {
  type: 'object',
  required: ['step'],
  properties: {
    step: { type: 'string', description: 'The step, in the words its Event and status.message use.' },
    note: { type: 'string', description: 'Why this step comes here, when it is not obvious (the leader, last).' },
    gates: { type: 'array', items: { type: 'string' }, description: 'The named gates the step waits on before it acts.' },
  },
} as const;

const planSchema = {
  type: 'object',
  description:
    'With queenmq.com/plan=true or queenmq.com/plan-only=true: the operation the spec would start now and its steps in ' +
    'order, computed from the cluster as observed by the rules the operations run. Nothing is changed for it.',
  properties: {
    operation: { type: 'string', nullable: true, description: 'The operation the spec would start (null: none is needed).' },
    target: { type: 'string' },
    message: { type: 'string', description: 'One line: what would happen, and what it waits for before it starts.' },
    generation: { type: 'integer', format: 'int64', description: 'The metadata.generation of the spec it was computed for.' },
    computedAt: { type: 'string', format: 'date-time' },
    steps: { type: 'array', items: planStepSchema },
  },
} as const;

const restoreStatusSchema = {
  type: 'object',
  properties: {
    backup: { type: 'string', description: 'The QueenBackup it formed from, if one was named.' },
    volumeSnapshot: { type: 'string', description: 'The VolumeSnapshot pod 0\'s claim was made from.' },
    sourceCluster: { type: 'string', description: 'The cluster the backup was taken of.' },
    raftIndex: { type: 'integer', format: 'int64', description: 'The Raft index the backup holds at least.' },
    claimUid: { type: 'string', description: 'The claim of pod 0, made from the snapshot.' },
    recoveredAt: { type: 'string', format: 'date-time', description: 'When node 1 recovered alone (QUEEN_RAFT_FORCE_RECOVER) and the variable was removed again.' },
  },
} as const;

const conditionSchema = {
  type: 'object',
  required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'],
  properties: {
    type: { type: 'string' },
    status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
    observedGeneration: { type: 'integer', format: 'int64' },
    lastTransitionTime: { type: 'string', format: 'date-time' },
    reason: { type: 'string' },
    message: { type: 'string' },
  },
} as const;

export const PHASES = ['Forming', 'Ready', 'Standby', 'Scaling', 'Upgrading', 'Replacing', 'Resizing', 'Promoting', 'SwitchingOver', 'Fenced', 'Degraded', 'Blocked'] as const;

export const statusSchema = {
  type: 'object',
  properties: {
    observedGeneration: { type: 'integer', format: 'int64' },
    phase: {
      type: 'string',
      enum: PHASES,
      description:
        'Forming, Ready, Standby (a standby that follows its source, at rest), Scaling, Upgrading, Replacing, Resizing, ' +
        'Promoting, SwitchingOver (an operation runs), Fenced (a source a switchover took out of its clients\' reach), Degraded (a pod ' +
        'is down, a voter is behind, or a standby does not follow; the reason is in message) or Blocked (only a person can decide; ' +
        'the reason is in message).',
    },
    message: { type: 'string', description: 'One line: what the operator is doing or waiting for.' },
    version: { type: 'string', description: 'The broker version every pod reports; empty while they differ.' },
    leader: { type: 'integer', format: 'int64', nullable: true },
    term: { type: 'integer', format: 'int64', nullable: true },
    clusterVersion: {
      type: 'integer',
      format: 'int32',
      nullable: true,
      description:
        "The cluster's catalogue version, as its brokers report it (/health raft.clusterVersion): a build that reads less cannot start on it. It never goes down.",
    },
    versions: {
      type: 'array',
      description: 'What the build of each image version run here reads, as its pods reported it: what a change of version is judged by before any pod stops.',
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['version'],
      items: {
        type: 'object',
        required: ['version', 'kinds'],
        properties: {
          version: { type: 'string' },
          kinds: { type: 'integer', format: 'int32', description: 'The catalogue version its build reads.' },
          seenAt: { type: 'string', format: 'date-time', description: 'When a pod of it last reported it.' },
        },
      },
    },
    finalization: {
      type: 'string',
      nullable: true,
      description: 'Whether the version the pods run is finalized: "2.7.0, not finalized: the way back to 2.6.0 is open", or "2.7.0, finalized at catalogue version 7".',
    },
    voters: { type: 'array', items: { type: 'integer', format: 'int64' } },
    learners: { type: 'array', items: { type: 'integer', format: 'int64' } },
    members: { type: 'array', items: memberSchema },
    commits: {
      type: 'boolean',
      nullable: true,
      description: 'Whether the last write probe committed: false when no write commits.',
    },
    lastProbeTime: { type: 'string', format: 'date-time' },
    lastProbeError: { type: 'string', nullable: true, description: 'Why the last write probe failed.' },
    operation: { ...operationSchema, nullable: true, description: 'The operation running now.' },
    lastOperation: { ...lastOperationSchema, description: 'How the last operation ended.' },
    upgrade: { ...upgradeStatusSchema, description: 'What a rolling upgrade keeps so that it can go back.' },
    plan: { ...planSchema, nullable: true },
    restore: { ...restoreStatusSchema, description: 'A cluster formed from a backup (spec.bootstrap.fromBackup): from what, and how far it got.' },
    role: roleStatusSchema,
    standby: standbyStatusSchema,
    fence: fenceStatusSchema,
    standbys: standbysStatusSchema,
    conditions: {
      type: 'array',
      items: conditionSchema,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
    },
  },
} as const;

export type QueenClusterSpec = FromSchema<typeof specSchema>;
export type StoredSpec = FromSchema<typeof specSchema, 'stored'>;
export type QueenClusterStatus = FromSchema<typeof statusSchema>;
export type MemberStatus = FromSchema<typeof memberSchema>;
export type OperationStatus = FromSchema<typeof operationSchema>;
export type LastOperationStatus = FromSchema<typeof lastOperationSchema>;
export type UpgradeStatus = FromSchema<typeof upgradeStatusSchema>;
export type PlanStatus = FromSchema<typeof planSchema>;
export type PlanStep = FromSchema<typeof planStepSchema>;
export type Condition = FromSchema<typeof conditionSchema>;
export type RestoreStatus = FromSchema<typeof restoreStatusSchema>;
export type Phase = (typeof PHASES)[number];

export interface ObjectMeta {
  name: string;
  namespace: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface QueenCluster {
  apiVersion: typeof API_VERSION;
  kind: typeof KIND;
  metadata: ObjectMeta;
  spec: QueenClusterSpec;
  status?: QueenClusterStatus;
}

/** Annotations a person sets on a QueenCluster. */
export const ANNOTATIONS = {
  replacePod: `${GROUP}/replace-pod`,
  retry: `${GROUP}/retry`,
  cancel: `${GROUP}/cancel`,
  pause: `${GROUP}/pause`,
  approve: `${GROUP}/approve`,
  plan: `${GROUP}/plan`,
  planOnly: `${GROUP}/plan-only`,
  backup: `${GROUP}/backup`,
  promote: `${GROUP}/promote`,
  switchover: `${GROUP}/switchover`,
  finalize: `${GROUP}/finalize`,
  /** On the pod template and so on every pod: the hash of the template it was made from. */
  configHash: `${GROUP}/config-hash`,
  /** On the StatefulSet: the hash of everything the operator renders from the spec. */
  specHash: `${GROUP}/spec-hash`,
} as const;

export const printerColumns = [
  { name: 'Version', type: 'string', jsonPath: '.status.version' },
  { name: 'Voters', type: 'string', jsonPath: '.status.voters' },
  { name: 'Commits', type: 'boolean', jsonPath: '.status.commits' },
  { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
  { name: 'Role', type: 'string', jsonPath: '.status.role', priority: 1 },
  { name: 'Message', type: 'string', jsonPath: '.status.message', priority: 1 },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
] as const;

/** A CustomResourceDefinition of this group and version: namespaced, served and stored, with a status subresource. */
export function definitionOf<C, M, S, T>(d: {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  printerColumns: C;
  description: string;
  metadata: M;
  spec: S;
  status: T;
}) {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${d.plural}.${GROUP}` },
    spec: {
      group: GROUP,
      names: { kind: d.kind, listKind: `${d.kind}List`, plural: d.plural, singular: d.singular, shortNames: d.shortNames },
      scope: 'Namespaced',
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: d.printerColumns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: d.description,
              required: ['spec'],
              properties: { apiVersion: { type: 'string' }, kind: { type: 'string' }, metadata: d.metadata, spec: d.spec, status: d.status },
            },
          },
        },
      ],
    },
  };
}

/** The CustomResourceDefinition object, as written to deploy/crd.yaml. */
export function customResourceDefinition() {
  return definitionOf({
    kind: KIND,
    plural: PLURAL,
    singular: 'queencluster',
    shortNames: ['qc'],
    printerColumns,
    description: 'A Queen 2.x broker cluster: a Raft cluster of 1, 3 or 5 voters in a StatefulSet.',
    metadata: {
      type: 'object',
      properties: {
        name: {
          type: 'string',
          maxLength: 40,
          pattern: '^[a-z]([-a-z0-9]*[a-z0-9])?$',
          description: 'Part of the pod, Service and peer names: a DNS label of at most 40 characters.',
        },
      },
    },
    spec: specSchema,
    status: statusSchema,
  });
}
