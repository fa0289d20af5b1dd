// The QueenBackup API (queenmq.com/v1alpha1): one backup of a QueenCluster, a VolumeSnapshot of one
// voter's volume with what the operator knew of it when it was taken. The operator writes them (a
// Temporal Schedule of spec.backup, or the queenmq.com/backup annotation); a restore names one in
// spec.bootstrap.fromBackup. The one source of its CRD (crd/generate.ts) and of its types.
//
// Why an object of its own rather than VolumeSnapshots with labels: `kubectl get queenbackups`
// lists what a person deciding a restore needs (the cluster, the node, the Raft index it holds at
// least, the size, the time, ready or failed and why), which a VolumeSnapshot cannot carry but in
// annotations; its status says what the backup waits for while it is taken; it owns its
// VolumeSnapshot, so deleting the backup deletes the snapshot; and it is its own RBAC resource.
import type { FromSchema } from './schema-types.ts';
import { definitionOf, GROUP, VERSION, type ObjectMeta } from './schema.ts';

export const BACKUP_KIND = 'QueenBackup';
export const BACKUP_PLURAL = 'queenbackups';

export const BACKUP_PHASES = ['Pending', 'Taking', 'Ready', 'Failed'] as const;
export type BackupPhase = (typeof BACKUP_PHASES)[number];

/** On a QueenBackup: the QueenCluster it was taken of, and what took it. */
export const BACKUP_LABELS = {
  cluster: `${GROUP}/cluster`,
  /** schedule (the Schedule of spec.backup) or request (the queenmq.com/backup annotation). */
  trigger: `${GROUP}/backup-trigger`,
} as const;

export const backupSpecSchema = {
  type: 'object',
  required: ['cluster'],
  description: 'What the backup is of. Written by the operator when it takes the backup.',
  properties: {
    cluster: { type: 'string', minLength: 1, maxLength: 253, description: 'The QueenCluster, in this namespace.' },
    volumeSnapshotClassName: { type: 'string', maxLength: 253, description: 'The class of its VolumeSnapshot; the default class when empty.' },
  },
  'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: 'a backup is what was taken: its spec cannot change' }],
} as const;

export const backupStatusSchema = {
  type: 'object',
  properties: {
    phase: {
      type: 'string',
      enum: BACKUP_PHASES,
      description: 'Pending (waiting for the cluster: a running operation, a caught-up voter), Taking (the snapshot is made), Ready, or Failed (message says why).',
    },
    message: { type: 'string', description: 'One line: what the backup waits for, or why it failed.' },
    nodeId: { type: 'integer', format: 'int64', description: 'The node whose volume was taken: a caught-up follower, the leader only when no follower is.' },
    pod: { type: 'string' },
    claim: { type: 'string', description: 'The claim the snapshot was taken of.' },
    raftIndex: {
      type: 'integer',
      format: 'int64',
      description: 'The Raft index the volume holds at least: the node\'s commit index read just before the snapshot was asked for. Every write committed up to it is in the backup.',
    },
    raftTerm: { type: 'integer', format: 'int64', description: 'The node\'s term at that moment.' },
    voters: {
      type: 'array',
      items: { type: 'integer', format: 'int64' },
      description:
        'The cluster\'s voters at that moment. A backup of a cluster of one voter is restored only under that cluster\'s name: ' +
        'its node 1 keeps the addresses the log registered, which under another name are another cluster\'s pod.',
    },
    volumeSnapshot: { type: 'string', description: 'The VolumeSnapshot (in this namespace, owned by this backup).' },
    size: { type: 'string', description: 'The snapshot\'s size (its restoreSize): the least a claim made from it can ask for.' },
    takenAt: { type: 'string', format: 'date-time', description: 'The snapshot\'s moment (its creationTime).' },
    readyToUse: { type: 'boolean', description: 'The snapshot can be restored from.' },
    workflowId: { type: 'string', description: 'The Temporal workflow that took it.' },
    startedAt: { type: 'string', format: 'date-time' },
    finishedAt: { type: 'string', format: 'date-time' },
  },
} as const;

export type QueenBackupSpec = FromSchema<typeof backupSpecSchema>;
export type QueenBackupStatus = FromSchema<typeof backupStatusSchema>;

export interface QueenBackup {
  apiVersion: `${typeof GROUP}/${typeof VERSION}`;
  kind: typeof BACKUP_KIND;
  metadata: Omit<ObjectMeta, 'namespace'> & { namespace: string; ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string }[] };
  spec: QueenBackupSpec;
  status?: QueenBackupStatus;
}

export const backupPrinterColumns = [
  { name: 'Cluster', type: 'string', jsonPath: '.spec.cluster' },
  { name: 'Node', type: 'integer', jsonPath: '.status.nodeId' },
  { name: 'Index', type: 'integer', jsonPath: '.status.raftIndex' },
  { name: 'Size', type: 'string', jsonPath: '.status.size' },
  { name: 'Ready', type: 'boolean', jsonPath: '.status.readyToUse' },
  { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
  { name: 'Taken', type: 'date', jsonPath: '.status.takenAt' },
  { name: 'Message', type: 'string', jsonPath: '.status.message', priority: 1 },
] as const;

export function queenBackupDefinition() {
  return definitionOf({
    kind: BACKUP_KIND,
    plural: BACKUP_PLURAL,
    singular: 'queenbackup',
    shortNames: ['qb'],
    printerColumns: backupPrinterColumns,
    description: 'A backup of a QueenCluster: a VolumeSnapshot of one voter\'s volume, taken by the operator.',
    metadata: { type: 'object' },
    spec: backupSpecSchema,
    status: backupStatusSchema,
  });
}
