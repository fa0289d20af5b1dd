// Writes crd/core-schemas.ts: the schemas of the Kubernetes core types the QueenCluster spec
// embeds (a container's resources and env, a pod's tolerations, image pull secrets and node
// selector), taken from the OpenAPI v3 spec of the Kubernetes version the test bed runs
// (api/openapi-spec/v3/api__v1_openapi.json of the k8s.io/kubernetes module), so the CRD refuses
// what a pod would not take, with the same field names and the same descriptions `kubectl explain`
// shows for a pod. `npm run generate:core`; test/unit/crd.test.ts fails when the file is stale.
//
// What a CRD schema cannot say is dropped ($ref and allOf are inlined; defaults, which only mark
// Go's zero values, and the patch strategies go); a Quantity becomes the API's one quantity grammar
// (crd/quantity.ts); and the fields the operator cannot give its pods are left out: a container's
// resource claims (the pods have no resourceClaims) and env's fileKeyRef (no env file volume).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The spec fields made from core types: where each is in the core API, and what is left out. */
export const EMBEDDED = [
  { name: 'resources', from: ['io.k8s.api.core.v1.Container', 'resources'], omit: ['claims'] },
  { name: 'env', from: ['io.k8s.api.core.v1.Container', 'env'], omit: ['valueFrom.fileKeyRef'] },
  { name: 'tolerations', from: ['io.k8s.api.core.v1.PodSpec', 'tolerations'], omit: [] },
  { name: 'imagePullSecrets', from: ['io.k8s.api.core.v1.PodSpec', 'imagePullSecrets'], omit: [] },
  { name: 'nodeSelector', from: ['io.k8s.api.core.v1.PodSpec', 'nodeSelector'], omit: [] },
] as const;

const QUANTITY = 'io.k8s.apimachinery.pkg.api.resource.Quantity';
/** The keys of an OpenAPI schema that a CRD's structural schema takes as they are. */
const KEPT = ['description', 'type', 'format', 'enum', 'required', 'x-kubernetes-list-type', 'x-kubernetes-list-map-keys', 'x-kubernetes-map-type'];

type Node = Record<string, unknown>;
const QUANTITY_MARK = '\u0000quantity\u0000';

/** The Kubernetes version of the test bed (test/testbed/versions.env). */
export function kubernetesVersion(): string {
  const env = readFileSync(fileURLToPath(new URL('../test/testbed/versions.env', import.meta.url)), 'utf8');
  const m = /^K8S_VERSION=(\S+)$/m.exec(env);
  if (!m) throw new Error('test/testbed/versions.env names no K8S_VERSION');
  return m[1]!;
}

/**
 * Where the OpenAPI v3 spec of the core API is: QUEEN_OPENAPI_SPEC, else the k8s.io/kubernetes
 * module in the Go module cache (which test/testbed/build-tools.sh downloads), fetched with
 * `go mod download` if it is not there yet.
 */
export function findCoreSpec(version = kubernetesVersion()): string {
  if (process.env.QUEEN_OPENAPI_SPEC) return process.env.QUEEN_OPENAPI_SPEC;
  const inModule = (dir: string) => join(dir, 'api', 'openapi-spec', 'v3', 'api__v1_openapi.json');
  const go = (args: string[]) => execFileSync('go', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GOFLAGS: '-mod=mod' } });
  let cache: string;
  try {
    cache = go(['env', 'GOMODCACHE']).trim();
  } catch (err) {
    throw new Error(`the OpenAPI spec of Kubernetes ${version} comes from the Go module k8s.io/kubernetes, and Go is not there to find it (${(err as Error).message.split('\n')[0]}): install Go, or set QUEEN_OPENAPI_SPEC to api__v1_openapi.json`);
  }
  const cached = inModule(join(cache, `k8s.io/kubernetes@${version}`));
  if (existsSync(cached)) return cached;
  const dir = (JSON.parse(go(['mod', 'download', '-json', `k8s.io/kubernetes@${version}`])) as { Dir?: string }).Dir;
  if (!dir || !existsSync(inModule(dir))) throw new Error(`go mod download k8s.io/kubernetes@${version} did not give ${cached}`);
  return inModule(dir);
}

/** The core schema at `from`, made a CRD's structural schema, with `omit` (dotted paths) left out. */
export function coreSchema(spec: { components: { schemas: Record<string, Node> } }, from: readonly [string, string], omit: readonly string[]): Node {
  const schemas = spec.components.schemas;
  const resolve = (ref: string) => {
    const name = ref.replace('#/components/schemas/', '');
    const s = schemas[name];
    if (!s) throw new Error(`the spec has no ${name}`);
    return { name, schema: s };
  };
  const convert = (node: Node, path: string): unknown => {
    let n = node;
    let refName: string | null = null;
    // allOf: [{$ref}] with a description of its own: the field's description wins.
    const allOf = n.allOf as Node[] | undefined;
    if (allOf?.length === 1 && allOf[0]!.$ref) {
      const r = resolve(allOf[0]!.$ref as string);
      refName = r.name;
      n = { ...r.schema, ...(n.description ? { description: n.description } : {}) };
    } else if (n.$ref) {
      const r = resolve(n.$ref as string);
      refName = r.name;
      n = r.schema;
    }
    if (refName === QUANTITY) return QUANTITY_MARK;
    const out: Node = {};
    for (const key of KEPT) if (n[key] !== undefined) out[key] = n[key];
    const properties = n.properties as Record<string, Node> | undefined;
    if (properties) {
      const kept: Record<string, unknown> = {};
      for (const [name, sub] of Object.entries(properties)) {
        const at = path ? `${path}.${name}` : name;
        if (omit.includes(at)) continue;
        kept[name] = convert(sub, at);
      }
      out.properties = kept;
      if (Array.isArray(out.required)) {
        out.required = (out.required as string[]).filter((r) => r in kept);
        if ((out.required as string[]).length === 0) delete out.required;
      }
    }
    if (n.items) out.items = convert(n.items as Node, path);
    if (n.additionalProperties && typeof n.additionalProperties === 'object') out.additionalProperties = convert(n.additionalProperties as Node, path);
    return out;
  };
  const owner = schemas[from[0]];
  const field = (owner?.properties as Record<string, Node> | undefined)?.[from[1]];
  if (!field) throw new Error(`the spec has no ${from[0]}.${from[1]}`);
  return convert(field, '') as Node;
}

/** The text of crd/core-schemas.ts, from the parsed spec. */
export function renderCoreSchemas(spec: { components: { schemas: Record<string, Node> } }, version: string): string {
  const lines = [
    `// Generated by crd/generate-core.ts from the OpenAPI v3 spec of Kubernetes ${version}: do not edit.`,
    '// The core types the QueenCluster spec embeds, as the API server describes them for a pod.',
    "import { quantitySchema } from './quantity.ts';",
    '',
    `export const CORE_VERSION = '${version}';`,
  ];
  for (const e of EMBEDDED) {
    const schema = coreSchema(spec, e.from, e.omit);
    const text = JSON.stringify(schema, null, 2).replaceAll(JSON.stringify(QUANTITY_MARK), 'quantitySchema');
    lines.push('', `/** ${e.from[0].split('.').pop()}.${e.from[1]}${e.omit.length ? `, without ${e.omit.join(', ')}` : ''}. */`);
    lines.push(`export const ${e.name} = ${text} as const;`);
  }
  return `${lines.join('\n')}\n`;
}

export function generatedCoreSchemas(): string {
  const version = kubernetesVersion();
  return renderCoreSchemas(JSON.parse(readFileSync(findCoreSpec(version), 'utf8')), version);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(fileURLToPath(new URL('core-schemas.ts', import.meta.url)), generatedCoreSchemas());
  console.log(`wrote crd/core-schemas.ts from the OpenAPI spec of Kubernetes ${kubernetesVersion()}`);
}
