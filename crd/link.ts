// The cluster link in the QueenCluster API: spec.link (this cluster serves a standby), spec.standby
// (this cluster is one), and status.standby (where the standby is). The broker's side is in
// test/sim/LINK.md (QUEEN_LINK_*).
import { subdomainRule } from './embedded.ts';

/** A key of a Secret in the cluster's namespace (the link token, the Admin token of spec.adminTokenSecret). */
export const secretKey = (description: string) =>
  ({
    type: 'object',
    required: ['name', 'key'],
    description,
    properties: {
      name: { type: 'string', minLength: 1, maxLength: 253, 'x-kubernetes-validations': [subdomainRule('a Secret name')], description: 'The Secret.' },
      key: {
        type: 'string',
        minLength: 1,
        maxLength: 253,
        pattern: '^[-._a-zA-Z0-9]+$',
        description: 'The key in the Secret: letters, digits, -, _ and . only, as a Secret key is.',
      },
    },
  }) as const;

/** A source node's Raft RPC address, as QUEEN_LINK_SOURCE takes it: host:port. */
export const RAFT_ADDRESS_PATTERN = '^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?:[0-9]{1,5}$';

export const linkSpecSchema = {
  type: 'object',
  required: ['tokenSecret'],
  description:
    'This cluster as a source: a standby cluster may read its log (on the raft port) with the token in this Secret key, which its ' +
    'pods get as QUEEN_LINK_TOKEN. The raft port is then also open, in the NetworkPolicy, to the pods of a standby (queenmq.com/link=true).',
  properties: {
    tokenSecret: secretKey('The Secret key (in this namespace) that holds the link token.'),
  },
} as const;

export const standbySpecSchema = {
  type: 'object',
  required: ['source', 'tokenSecret'],
  description:
    "This cluster is a standby: it replays its source's log a moment behind, serves reads, refuses writes (503, code standby) " +
    'and becomes an ordinary cluster when promoted (annotation queenmq.com/promote=true), or in a switchover (queenmq.com/switchover=true). ' +
    'A promoted cluster ignores it (as its brokers do): it stays as where the cluster came from, and removing it restarts the pods once.',
  properties: {
    source: {
      type: 'object',
      description: "The source: a QueenCluster in this Kubernetes cluster (cluster), or its nodes' Raft addresses (addresses).",
      properties: {
        cluster: {
          type: 'object',
          required: ['name'],
          description:
            "A QueenCluster of this Kubernetes cluster, reached at its pods' names on its raft port (it must be this cluster's raftPort).",
          properties: {
            name: { type: 'string', minLength: 1, maxLength: 40, pattern: '^[a-z]([-a-z0-9]*[a-z0-9])?$' },
            namespace: {
              type: 'string',
              minLength: 1,
              maxLength: 63,
              pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$',
              description: "Its namespace; this cluster's when unset.",
            },
          },
        },
        addresses: {
          type: 'array',
          minItems: 1,
          maxItems: 16,
          description: "The source nodes' Raft RPC addresses (host:port, plain HTTP), for a source anywhere else.",
          items: { type: 'string', maxLength: 259, pattern: RAFT_ADDRESS_PATTERN },
        },
      },
      'x-kubernetes-validations': [
        {
          rule: 'has(self.cluster) != has(self.addresses)',
          message:
            "name the source either by cluster (a QueenCluster in this Kubernetes cluster) or by addresses (its nodes' Raft addresses, host:port), not both and not neither",
        },
      ],
    },
    tokenSecret: secretKey(
      "The Secret key (in this namespace) that holds the source's link token (the source's spec.link.tokenSecret holds the same): its " +
        'pods present it as QUEEN_LINK_SOURCE_TOKEN, and serve it as QUEEN_LINK_TOKEN once promoted.',
    ),
    seed: {
      type: 'boolean',
      default: true,
      description:
        "true: node 1 starts from the source's snapshot and the other nodes join it (a source of any age). false: every node starts " +
        'empty and replays the source from its first entry, which works only while the source still holds its whole log. Fixed at creation.',
      'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: 'spec.standby.seed is how the standby was formed and cannot change' }],
    },
  },
} as const;

export const LINK_ROLES = ['primary', 'source', 'standby', 'promoted'] as const;

const promotedSchema = {
  type: 'object',
  nullable: true,
  description: 'The promotion, once done: where the standby stood in its source, and what the promotion may have lost.',
  properties: {
    at: { type: 'string', format: 'date-time' },
    position: { type: 'integer', format: 'int64', description: "The last source entry it applied (its index in the source's log)." },
    positionTime: {
      type: 'string',
      format: 'date-time',
      nullable: true,
      description: 'When the source wrote that entry: every write the source committed before it is here.',
    },
    unreadEntries: {
      type: 'integer',
      format: 'int64',
      nullable: true,
      description: 'Entries the source had applied and the standby had not read when the source last answered: lost.',
    },
    lastAnswerAt: {
      type: 'string',
      format: 'date-time',
      nullable: true,
      description: 'When the source last answered: what it committed after that is lost too, and unknown here.',
    },
    planned: { type: 'boolean', description: 'A switchover (nothing lost), not a promotion after a disaster.' },
  },
} as const;

export const standbyStatusSchema = {
  type: 'object',
  nullable: true,
  description: 'Where the standby is, as its leader reports it (GET /api/v1/system/link).',
  properties: {
    source: { type: 'string', description: 'What it follows: the QueenCluster (namespace/name) or the addresses.' },
    state: { type: 'string', description: 'following, waiting (something that passes), halted (it needs a new seed), or idle.' },
    reading: { type: 'string', description: 'The source node it reads now.' },
    position: { type: 'integer', format: 'int64', nullable: true, description: "The last source entry it applied (its index in the source's log)." },
    lagEntries: { type: 'integer', format: 'int64', nullable: true, description: 'Entries of the source it had still to read when the source last answered.' },
    lagSeconds: { type: 'number', nullable: true, description: 'How old the last entry it applied is, while the source holds more; 0 when it holds everything.' },
    lastAppliedAt: { type: 'string', format: 'date-time', nullable: true, description: 'When the source wrote the last entry it applied.' },
    lastAnswerAt: { type: 'string', format: 'date-time', nullable: true, description: 'When the source last answered it.' },
    error: { type: 'string', nullable: true, description: 'Why it waits or stopped, as the broker says.' },
    promoted: promotedSchema,
  },
} as const;

export const roleStatusSchema = {
  type: 'string',
  enum: LINK_ROLES,
  description: 'primary, source (a standby reads it), standby (it replays its source) or promoted (a standby that was promoted).',
} as const;

export const fenceStatusSchema = {
  type: 'object',
  nullable: true,
  description:
    "On a source a switchover took out of its clients' reach: by which standby and since when. The operator starts nothing on it " +
    'meanwhile, and the switchover makes it a standby of the new primary at its end.',
  properties: {
    by: { type: 'string', description: 'The standby that switches over (namespace/name).' },
    since: { type: 'string', format: 'date-time' },
  },
} as const;

export const standbysStatusSchema = {
  type: 'array',
  description:
    'The QueenClusters of this Kubernetes cluster that are standbys of this one, with the version they run: an upgrade of this cluster ' +
    'waits (Blocked) until they run its new version, since its entries at a newer cluster version would stop their replay.',
  items: {
    type: 'object',
    required: ['name'],
    properties: {
      name: { type: 'string', description: 'namespace/name' },
      version: { type: 'string', description: 'The version it runs (its status.version, else its spec.version).' },
    },
  },
} as const;
