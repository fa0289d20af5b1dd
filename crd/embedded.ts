// The core types the QueenCluster spec embeds (crd/core-schemas.ts, generated from the core API's
// own OpenAPI spec), with the checks the API server makes of a pod added as the CRD's schema rules
// and CEL, so a value a pod would not take is refused when the QueenCluster is written, with the
// field named, instead of failing later when the operator applies the StatefulSet. Each rule
// follows a check of k8s.io/kubernetes/pkg/apis/core/validation (named beside it), and the e2e
// scenario `embedded` runs every refusal, and every value a pod takes, against the API server.
import * as core from './core-schemas.ts';

// ---- names, as k8s.io/apimachinery/pkg/util/validation checks them -----------------------------

const DNS_SUBDOMAIN = '[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*';
/** IsQualifiedName: an optional DNS subdomain prefix and '/', then a name of at most 63 characters. */
const QUALIFIED_NAME = `^(${DNS_SUBDOMAIN}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`;
/** IsValidLabelValue. */
const LABEL_VALUE = '^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$';

/** CEL: `x` is a qualified name (its prefix at most 253 characters). */
const qualified = (x: string) => `${x}.matches('${QUALIFIED_NAME}') && (!${x}.contains('/') || ${x}.indexOf('/') <= 253)`;
/** CEL: `x` is a DNS subdomain (ValidateSecretName, ValidateConfigMapName, a priority class's name). */
const subdomain = (x: string) => `${x}.size() <= 253 && ${x}.matches('^${DNS_SUBDOMAIN}$')`;

/** The rule of a string field that names an object by a DNS subdomain (a Secret, a StorageClass). */
export const subdomainRule = (what: string) => ({ rule: subdomain('self'), message: `${what} is ${SUBDOMAIN_WORDS}` }) as const;

const QUALIFIED_WORDS = "a name of letters, digits, '-', '_' or '.' (at most 63, starting and ending with a letter or digit), with an optional DNS prefix and '/', such as example.com/my-name";
const LABEL_VALUE_WORDS = "empty, or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";
const SUBDOMAIN_WORDS = "a DNS subdomain: lower-case letters, digits, '-' and '.', at most 253";

// ---- labels, annotations, node selector (ValidateLabels, ValidateAnnotations) --------------------

const MAP_LIMIT = 64;

export const labelMap = {
  type: 'object',
  maxProperties: MAP_LIMIT,
  additionalProperties: {
    type: 'string',
    maxLength: 63,
    'x-kubernetes-validations': [{ rule: `self.matches('${LABEL_VALUE}')`, message: `a label value is ${LABEL_VALUE_WORDS}` }],
  },
  'x-kubernetes-validations': [{ rule: `self.all(k, ${qualified('k')})`, message: `a label key is ${QUALIFIED_WORDS}` }],
} as const;

export const annotationMap = {
  type: 'object',
  maxProperties: MAP_LIMIT,
  additionalProperties: { type: 'string' },
  'x-kubernetes-validations': [{ rule: `self.all(k, ${qualified('k.lowerAscii()')})`, message: `an annotation key is ${QUALIFIED_WORDS}` }],
} as const;

export const nodeSelector = {
  ...core.nodeSelector,
  maxProperties: MAP_LIMIT,
  additionalProperties: labelMap.additionalProperties,
  'x-kubernetes-validations': labelMap['x-kubernetes-validations'],
} as const;

export const priorityClassName = {
  type: 'string',
  maxLength: 253,
  description: 'The PriorityClass of the pods.',
  'x-kubernetes-validations': [{ rule: subdomain('self'), message: `a PriorityClass name is ${SUBDOMAIN_WORDS}` }],
} as const;

// ---- imagePullSecrets ----------------------------------------------------------------------------

export const imagePullSecrets = {
  ...core.imagePullSecrets,
  maxItems: 16,
  items: {
    ...core.imagePullSecrets.items,
    // The list is keyed by name: a name is required (the core type lets it be empty, and warns).
    required: ['name'],
    properties: {
      name: {
        ...core.imagePullSecrets.items.properties.name,
        maxLength: 253,
        'x-kubernetes-validations': [{ rule: subdomain('self'), message: `a Secret name is ${SUBDOMAIN_WORDS}` }],
      },
    },
  },
} as const;

// ---- resources (validateResourceRequirements, validateContainerResourceName) ---------------------

const STANDARD_RESOURCES = "['cpu', 'memory', 'ephemeral-storage']";
/** CEL: the resource `k` may be asked for more than it is limited to (IsOvercommitAllowed). */
const overcommit = (k: string) => `(!${k}.contains('/') || ${k}.contains('kubernetes.io/')) && !${k}.startsWith('hugepages-')`;
const q = (x: string) => `quantity(string(${x}))`;
const isQ = (x: string) => `isQuantity(string(${x}))`;

const resourceList = (which: 'limits' | 'requests') =>
  ({
    ...core.resources.properties[which],
    maxProperties: 16,
    additionalProperties: {
      ...core.resources.properties[which].additionalProperties,
      'x-kubernetes-validations': [
        ...core.resources.properties[which].additionalProperties['x-kubernetes-validations'],
        { rule: `!${isQ('self')} || ${q('self')}.compareTo(quantity('0')) >= 0`, message: 'must be greater than or equal to 0' },
      ],
    },
    'x-kubernetes-validations': [
      {
        rule: `self.all(k, k in ${STANDARD_RESOURCES} || (k.startsWith('hugepages-') && ${qualified('k')}) || (k.contains('/') && ${qualified('k')}))`,
        message: 'a container resource is cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource named with its domain, such as example.com/device',
      },
      {
        rule: `self.all(k, k in ${STANDARD_RESOURCES} || k.contains('kubernetes.io/') || k.startsWith('hugepages-') || !${isQ('self[k]')} || ${q('self[k]')}.isInteger())`,
        message: 'an extended resource must be a whole number',
      },
    ],
  }) as const;

export const resources = {
  ...core.resources,
  properties: { limits: resourceList('limits'), requests: resourceList('requests') },
  'x-kubernetes-validations': [
    {
      rule:
        `!has(self.requests) || self.requests.all(k, ${overcommit('k')} || (has(self.limits) && k in self.limits && ` +
        `(!${isQ('self.requests[k]')} || !${isQ('self.limits[k]')} || ${q('self.requests[k]')}.compareTo(${q('self.limits[k]')}) == 0)))`,
      message: 'a request of hugepages or an extended resource must be equal to its limit',
      fieldPath: '.requests',
    },
    {
      rule:
        `!has(self.requests) || !has(self.limits) || self.requests.all(k, !(k in self.limits) || ` +
        `!${isQ('self.requests[k]')} || !${isQ('self.limits[k]')} || ${q('self.requests[k]')}.compareTo(${q('self.limits[k]')}) <= 0)`,
      message: 'a request must be less than or equal to its limit',
      fieldPath: '.requests',
    },
    {
      rule:
        "[has(self.limits) ? self.limits : {}, has(self.requests) ? self.requests : {}].exists(m, m.exists(k, k.startsWith('hugepages-'))) == false || " +
        "[has(self.limits) ? self.limits : {}, has(self.requests) ? self.requests : {}].exists(m, m.exists(k, k in ['cpu', 'memory']))",
      message: 'hugepages require cpu or memory',
    },
  ],
} as const;

// ---- env (ValidateEnv, validateEnvVarValueFrom and the selectors) ---------------------------------

/**
 * The variables the operator sets on the broker container itself (activities/resources.ts): an
 * entry of spec.env with one of these names would replace the operator's, so it is refused.
 */
export const RESERVED_ENV = [
  'PORT',
  'QUEEN_RAFT_REPLICATOR',
  'QUEEN_RAFT_DIR',
  'QUEEN_RAFT_NODE_ID',
  'QUEEN_RAFT_PEERS',
  'QUEEN_RAFT_TOKEN',
  'QUEEN_ENCRYPTION_KEY',
  'QUEEN_SERVER_ID',
  'QUEEN_LOG_JSON',
  'QUEEN_RAFT_CLUSTER_VERSION_MS',
  'QUEEN_PROXY_EMBEDDED',
  'QUEEN_PROXY_PORT',
  'QUEEN_PROXY_SPOOL_DIR',
  'QUEEN_PROXY_JWT_SECRET',
  'QUEEN_PROXY_CP_TOKEN',
  'QUEEN_PROXY_BOOTSTRAP_API_KEY',
  'QUEEN_PROXY_PUBLIC_URL',
  'QUEEN_KAFKA_EMBEDDED',
  'QUEEN_KAFKA_ADDR',
  'QUEEN_KAFKA_ADVERTISED_ADDR',
  'QUEEN_KAFKA_NODE_ID',
  'QUEEN_TOKEN',
] as const;

const celList = (items: readonly string[]) => `[${items.map((i) => `'${i}'`).join(', ')}]`;

const ENV_FIELD_PATHS = ['metadata.name', 'metadata.namespace', 'metadata.uid', 'spec.nodeName', 'spec.serviceAccountName', 'status.hostIP', 'status.hostIPs', 'status.podIP', 'status.podIPs'];
const ENV_RESOURCES = ['limits.cpu', 'limits.memory', 'limits.ephemeral-storage', 'requests.cpu', 'requests.memory', 'requests.ephemeral-storage'];
const BYTE_DIVISORS = ['1', '1k', '1M', '1G', '1T', '1P', '1E', '1Ki', '1Mi', '1Gi', '1Ti', '1Pi', '1Ei'];
const CONFIG_KEY = '^[-._a-zA-Z0-9]+$';

type KeySelector = typeof core.env.items.properties.valueFrom.properties.secretKeyRef | typeof core.env.items.properties.valueFrom.properties.configMapKeyRef;
const keySelector = <S extends KeySelector>(kind: 'ConfigMap' | 'Secret', of: S) =>
  ({
    type: 'object',
    description: of.description,
    'x-kubernetes-map-type': 'atomic',
    // The core type lets the name be empty, but a pod's validation does not.
    required: ['key', 'name'],
    properties: {
      name: { ...of.properties.name, maxLength: 253, 'x-kubernetes-validations': [{ rule: subdomain('self'), message: `a ${kind} name is ${SUBDOMAIN_WORDS}` }] },
      key: {
        ...of.properties.key,
        maxLength: 253,
        'x-kubernetes-validations': [
          {
            rule: `self.matches('${CONFIG_KEY}') && self != '.' && !self.startsWith('..')`,
            message: "a key is letters, digits, '-', '_' or '.' (such as key.name), and does not start with '..'",
          },
        ],
      },
      optional: of.properties.optional,
    },
  }) as const;

const valueFrom = core.env.items.properties.valueFrom;

export const env = {
  ...core.env,
  maxItems: 128,
  description: 'Extra broker settings, set after the ones the operator sets (which they cannot replace), as a container\'s env.',
  items: {
    ...core.env.items,
    properties: {
      ...core.env.items.properties,
      name: { ...core.env.items.properties.name, minLength: 1, maxLength: 256 },
      value: core.env.items.properties.value,
      valueFrom: {
        ...valueFrom,
        properties: {
          configMapKeyRef: keySelector('ConfigMap', valueFrom.properties.configMapKeyRef),
          secretKeyRef: keySelector('Secret', valueFrom.properties.secretKeyRef),
          fieldRef: {
            ...valueFrom.properties.fieldRef,
            properties: {
              apiVersion: { ...valueFrom.properties.fieldRef.properties.apiVersion, enum: ['v1'] },
              fieldPath: {
                ...valueFrom.properties.fieldRef.properties.fieldPath,
                maxLength: 330,
                'x-kubernetes-validations': [
                  {
                    rule: `self in ${celList(ENV_FIELD_PATHS)} || self.matches("^metadata[.](labels|annotations)[[]'[^']+'[]]$")`,
                    message: `supported values: ${ENV_FIELD_PATHS.join(', ')}, metadata.labels['<key>'], metadata.annotations['<key>']`,
                  },
                ],
              },
            },
          },
          resourceFieldRef: {
            ...valueFrom.properties.resourceFieldRef,
            properties: {
              ...valueFrom.properties.resourceFieldRef.properties,
              resource: {
                ...valueFrom.properties.resourceFieldRef.properties.resource,
                maxLength: 253,
                'x-kubernetes-validations': [
                  {
                    rule: `self in ${celList(ENV_RESOURCES)} || self.startsWith('requests.hugepages-') || self.startsWith('limits.hugepages-')`,
                    message: `supported values: ${ENV_RESOURCES.join(', ')}, requests.hugepages-<size>, limits.hugepages-<size>`,
                  },
                ],
              },
            },
            'x-kubernetes-validations': [
              {
                rule:
                  `!has(self.divisor) || !${isQ('self.divisor')} || ${q('self.divisor')}.compareTo(quantity('0')) == 0 || ` +
                  `(self.resource.endsWith('.cpu') ? ['1m', '1'] : ${celList(BYTE_DIVISORS)}).exists(d, quantity(d).compareTo(${q('self.divisor')}) == 0)`,
                message: `a divisor is 1m or 1 for cpu, and one of ${BYTE_DIVISORS.join(', ')} for the other resources`,
                fieldPath: '.divisor',
              },
            ],
          },
        },
        'x-kubernetes-validations': [
          {
            rule: "[has(self.fieldRef), has(self.resourceFieldRef), has(self.configMapKeyRef), has(self.secretKeyRef)].filter(x, x).size() == 1",
            message: 'must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`, and only one',
          },
        ],
      },
    },
    'x-kubernetes-validations': [
      {
        rule: "self.name.matches('^[ -<>-~]+$')",
        message: "an environment variable's name is printable ASCII characters other than '='",
        fieldPath: '.name',
      },
      {
        rule: `!(self.name in ${celList(RESERVED_ENV)})`,
        messageExpression: `self.name + ' is set by the operator and cannot be set in env: the spec has a field for what it controls (port, raftPort, secretName, proxy, kafka, upgrade.finalize)'`,
        fieldPath: '.name',
      },
      {
        rule: "!has(self.valueFrom) || !has(self.value) || self.value == ''",
        message: 'may not be specified when `value` is not empty',
        fieldPath: '.valueFrom',
      },
    ],
  },
} as const;

// ---- tolerations (ValidateTolerations) ------------------------------------------------------------

export const tolerations = {
  ...core.tolerations,
  maxItems: 64,
  items: {
    ...core.tolerations.items,
    properties: {
      ...core.tolerations.items.properties,
      key: { ...core.tolerations.items.properties.key, maxLength: 317, 'x-kubernetes-validations': [{ rule: `self == '' || ${qualified('self')}`, message: `a taint key is ${QUALIFIED_WORDS}` }] },
      // Lt and Gt need the alpha feature gate TaintTolerationComparisonOperators, off by default.
      operator: { ...core.tolerations.items.properties.operator, enum: ['Equal', 'Exists', ''] },
      effect: { ...core.tolerations.items.properties.effect, enum: ['NoSchedule', 'PreferNoSchedule', 'NoExecute', ''] },
      value: { ...core.tolerations.items.properties.value, maxLength: 63 },
    },
    'x-kubernetes-validations': [
      {
        rule: "(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')",
        message: 'operator must be Exists when `key` is empty, which means "match all values and all keys"',
        fieldPath: '.operator',
      },
      {
        rule: "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
        message: "effect must be 'NoExecute' when `tolerationSeconds` is set",
        fieldPath: '.effect',
      },
      {
        rule: "!has(self.operator) || self.operator != 'Exists' || !has(self.value) || self.value == ''",
        message: "value must be empty when `operator` is 'Exists'",
        fieldPath: '.value',
      },
      {
        rule: `(has(self.operator) && self.operator == 'Exists') || !has(self.value) || self.value.matches('${LABEL_VALUE}')`,
        message: `a toleration's value is ${LABEL_VALUE_WORDS}`,
        fieldPath: '.value',
      },
    ],
  },
} as const;
