// Writes what deploy/, the chart and docs/reference.md serve from their sources:
// - deploy/crd.yaml, and the chart's templates/crd.yaml, from crd/schema.ts and crd/backup.ts;
// - from the Helm chart charts/queen-operator (the one source of the install), rendered with Helm:
//   deploy/install.yaml (its defaults, cluster-wide, with the Namespace), deploy/namespaced.yaml
//   (namespaced: true), deploy/rbac.yaml (its ClusterRole) and deploy/alerts.yaml (its
//   PrometheusRule's rules, as a Prometheus rule file);
// - docs/reference.md: the tables of the flags (the command of options.ts), the annotations
//   (crd/annotations.ts), the spec (crd/schema.ts) and the chart's values (values.yaml).
// `npm run generate`; test/unit/crd.test.ts fails when one is stale. Rendering needs the Helm of
// test/testbed/versions.env, which test/testbed/build-tools.sh builds (or HELM naming a helm binary).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMap, isScalar, parse, parseDocument, stringify, type YAMLMap } from 'yaml';
import { operatorCommand } from '../options.ts';
import { USER_ANNOTATIONS } from './annotations.ts';
import { annotationMap, env, imagePullSecrets, labelMap, nodeSelector, priorityClassName, resources, tolerations } from './embedded.ts';
import { queenBackupDefinition } from './backup.ts';
import { customResourceDefinition, specSchema } from './schema.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const CHART = join(ROOT, 'charts', 'queen-operator');
const deploy = (file: string) => join(ROOT, 'deploy', file);

/** The operator's definitions: QueenCluster, then QueenBackup. */
const definitions = () => [customResourceDefinition(), queenBackupDefinition()] as { metadata: Record<string, unknown> }[];

export function renderCrdYaml(): string {
  return (
    '# Generated from crd/schema.ts and crd/backup.ts by `npm run generate`: edit the schemas, not this file.\n' +
    definitions().map((d) => stringify(d, { lineWidth: 0 })).join('---\n')
  );
}

/**
 * The chart's template of the definition: the same CRD, installed with the chart (cluster-wide) and
 * upgraded with it, kept when the release is uninstalled (the QueenClusters with it).
 */
export function renderCrdTemplate(): string {
  const kept = definitions().map((crd) => ({ ...crd, metadata: { ...crd.metadata, annotations: { 'helm.sh/resource-policy': 'keep' } } }));
  return (
    '{{- if and .Values.crds.install (not .Values.namespaced) }}\n' +
    '# Generated from crd/schema.ts and crd/backup.ts by `npm run generate`: edit the schemas, not this file.\n' +
    kept.map((d) => stringify(d, { lineWidth: 0 })).join('---\n') +
    '{{- end }}\n'
  );
}

/** The Helm that renders the chart: HELM, or the one test/testbed/build-tools.sh builds into the tools cache. */
export function helmBinary(): string {
  if (process.env.HELM) return process.env.HELM;
  const version = /^HELM_VERSION=(\S+)$/m.exec(readFileSync(join(ROOT, 'test', 'testbed', 'versions.env'), 'utf8'))?.[1];
  const cache = process.env.QUEEN_TOOLS_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'queen-operator', 'tools');
  const helm = join(cache, `helm-${version}`, 'helm');
  if (!existsSync(helm)) {
    throw new Error(`the chart is rendered with Helm ${version}, which is not built yet (${helm}): run bash test/testbed/build-tools.sh (or set HELM to a helm binary)`);
  }
  return helm;
}

/** `helm template` of the chart as the release queen-operator in queen-system, with these values. */
export function renderChart(values: Record<string, string> = {}, showOnly?: string): string {
  const args = ['template', 'queen-operator', CHART, '--namespace', 'queen-system', ...Object.entries(values).flatMap(([k, v]) => ['--set', `${k}=${v}`]), ...(showOnly ? ['--show-only', showOnly] : [])];
  const r = spawnSync(helmBinary(), args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`helm ${args.join(' ')} failed: ${r.error?.message ?? r.stderr}`);
  return r.stdout;
}

const INSTALL_HEADER = `# Generated from charts/queen-operator by \`npm run generate\` (its default values): edit the chart, not this file.
# The operator cluster-wide: the QueenCluster definition, the ClusterRole and its binding, the
# namespace queen-system, the operator's Deployment and its metrics Service.
#   kubectl apply -f deploy/install.yaml
#   kubectl -n queen-system set env deployment/queen-operator TEMPORAL_ADDRESS=<host:port>
`;

export function renderInstallYaml(): string {
  return INSTALL_HEADER + renderChart({ 'namespace.create': 'true' });
}

const NAMESPACED_HEADER = `# Generated from charts/queen-operator by \`npm run generate\` (namespaced=true): edit the chart, not this file.
# The operator limited to one namespace. A cluster admin installs the definition and the role once:
#   kubectl apply -f deploy/crd.yaml -f deploy/rbac.yaml
# then each team, in its own namespace (the role is bound there only, and the operator watches
# only that namespace, on a task queue of its own):
#   kubectl -n <namespace> apply -f deploy/namespaced.yaml
# To watch more namespaces, add them to --namespace and bind the role in each (a RoleBinding
# like the one below); an operator not bound in a namespace it is told to watch says so once.
`;

/** The operator limited to the namespace it is applied in: no cluster-wide object, a RoleBinding, --namespace and a task queue of its own. */
export function renderNamespacedYaml(): string {
  return NAMESPACED_HEADER + renderChart({ namespaced: 'true' });
}

export function renderRbacYaml(): string {
  return '# Generated from charts/queen-operator by `npm run generate` (its ClusterRole): edit the chart, not this file.\n' + renderChart({}, 'templates/clusterrole.yaml');
}

/** The chart's PrometheusRule as a Prometheus rule file (its spec: the groups), with the default thresholds. */
export function renderAlertsYaml(): string {
  const rule = parse(renderChart({ 'metrics.prometheusRule.enabled': 'true' }, 'templates/prometheusrule.yaml')) as { spec: { groups: unknown[] } };
  return (
    '# Generated from charts/queen-operator by `npm run generate` (its PrometheusRule, default thresholds): edit the\n' +
    '# chart, not this file. A Prometheus rule file: rule_files: [alerts.yaml]. test/unit/alerts.test.ts tests each alert.\n' +
    stringify({ groups: rule.spec.groups }, { lineWidth: 0 })
  );
}

const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** The table of the annotations a person sets. */
export function annotationTable(): string {
  const rows = USER_ANNOTATIONS.map((a) => `| \`${a.annotation}\` | ${cell(a.values)} | ${cell(a.effect)} |`);
  return ['| annotation | values | what it does |', '|---|---|---|', ...rows].join('\n');
}

/** The table of the operator's flags: every option of the command, its variable and default. */
export function flagTable(): string {
  const rows = operatorCommand()
    .options.filter((o) => o.long !== '--help')
    .map((o) => {
      const dflt = o.defaultValueDescription ?? (o.defaultValue === undefined ? '' : String(o.defaultValue));
      const choices = o.argChoices && !o.argChoices.every((c) => o.description.includes(c)) ? ` (${o.argChoices.join(', ')})` : '';
      return `| \`${o.flags}\` | ${o.envVar ? `\`${o.envVar}\`` : ''} | ${dflt ? `\`${dflt}\`` : ''} | ${cell(o.description)}${choices} |`;
    });
  return ['| flag | environment | default | what it sets |', '|---|---|---|---|', ...rows].join('\n');
}

/** What the embedded core types are, for the spec table: the pod's own types, as `kubectl explain` shows them. */
const EMBEDDED: ReadonlyMap<object, string> = new Map<object, string>([
  [env, 'list of EnvVar'],
  [resources, 'ResourceRequirements'],
  [tolerations, 'list of Toleration'],
  [imagePullSecrets, 'list of LocalObjectReference'],
  [nodeSelector, 'map of label values'],
  [labelMap, 'map of label values'],
  [annotationMap, 'map of annotation values'],
  [priorityClassName, 'string'],
]);

interface SchemaNode {
  type?: string;
  enum?: readonly unknown[];
  default?: unknown;
  description?: string;
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
}

/** The rows of the spec table: every field of the spec, nested ones by their path; the core types a pod has by their name. */
function specRows(node: SchemaNode, path: string, embeddedAs?: (field: object) => string | undefined): string[] {
  const rows: string[] = [];
  for (const [key, field] of Object.entries(node.properties ?? {})) {
    const at = `${path}${key}`;
    const embedded = EMBEDDED.get(field) ?? (embeddedAs ? embeddedAs(field) : undefined);
    const type = embedded ?? (field.enum ? field.enum.map((v) => `\`${String(v)}\``).join(', ') : field.type === 'array' ? `list of ${field.items?.type ?? ''}` : (field.type ?? ''));
    const dflt = field.default === undefined || (typeof field.default === 'object' && Object.keys(field.default as object).length === 0) ? '' : `\`${typeof field.default === 'string' ? field.default : JSON.stringify(field.default)}\``;
    const words = field.description ?? (embedded ? `as in a pod's spec (\`kubectl explain queencluster.spec.${at}\`)` : '');
    rows.push(`| \`${at}\` | ${cell(type)} | ${dflt} | ${cell(words)} |`);
    if (!embedded && field.type === 'object' && field.properties) rows.push(...specRows(field, `${at}.`));
    if (!embedded && field.type === 'array' && field.items?.properties) rows.push(...specRows(field.items, `${at}[].`));
  }
  return rows;
}

/** The table of the QueenCluster's spec, from crd/schema.ts. */
export function specTable(): string {
  // Embedded types are spread into the schema with a description of their own (resources): known by their properties.
  const byProperties = (field: object) => {
    for (const [known, name] of EMBEDDED) if ((field as SchemaNode).properties && (field as SchemaNode).properties === (known as SchemaNode).properties) return name;
    return undefined;
  };
  const rows = specRows(specSchema as unknown as SchemaNode, '', byProperties);
  return ['| field | type | default | what it is |', '|---|---|---|---|', ...rows].join('\n');
}

/** The rows of the chart's values: each value with a `# --` comment, by its path (a map without one is walked into). */
function valueRows(map: YAMLMap, path: string): string[] {
  const rows: string[] = [];
  for (const [i, pair] of map.items.entries()) {
    const key = String(isScalar(pair.key) ? pair.key.value : pair.key);
    const at = `${path}${key}`;
    // The comment of a nested map's first value is the map's own.
    const comment = ((isScalar(pair.key) ? pair.key.commentBefore : undefined) ?? (i === 0 ? map.commentBefore : undefined) ?? '').trim();
    const words = /(?:^|\n)\s*-- ([\s\S]*)$/.exec(comment)?.[1]?.replace(/\n\s*/g, ' ');
    if (words === undefined && isMap(pair.value)) {
      rows.push(...valueRows(pair.value, `${at}.`));
      continue;
    }
    const value = JSON.stringify((pair.value as { toJSON(): unknown } | null)?.toJSON() ?? null);
    rows.push(`| \`${at}\` | \`${value}\` | ${cell(words ?? '')} |`);
  }
  return rows;
}

/** The table of the chart's values, from the comments of values.yaml. */
export function valuesTable(): string {
  const doc = parseDocument(readFileSync(join(CHART, 'values.yaml'), 'utf8'));
  return ['| value | default | what it sets |', '|---|---|---|', ...valueRows(doc.contents as YAMLMap, '')].join('\n');
}

const REFERENCE = join(ROOT, 'docs', 'reference.md');

/** docs/reference.md: the flags, the annotations and the spec, each table from its source. */
export function renderReference(): string {
  return `<!-- Generated by \`npm run generate\` from options.ts, crd/annotations.ts, crd/schema.ts and charts/queen-operator/values.yaml: edit those, not this file. -->
# Configuration reference

## Flags

Every flag has an environment variable, checked at start: a bad value stops the operator with a
message that names the flag (or the variable it came from) and what it takes. A flag wins over its
variable. \`npm start -- --help\` prints the same list. The chart sets them from its values
([below](#chart-values)), and passes more with \`extraArgs\` and \`extraEnv\`.

${flagTable()}

## Annotations

An annotation takes the values below; any other value, and an annotation of \`queenmq.com/\` that is
not one of these, is a Warning Event (\`kubectl describe queencluster\`) that names it and the
values it takes, and acts as unset.

${annotationTable()}

## The QueenCluster spec

\`kubectl explain queencluster.spec\` shows the same, with the core types' own fields.

${specTable()}

## Chart values

The values of \`charts/queen-operator\` (\`helm install ... --set <value>=...\`), from its
\`values.yaml\`; [install.md](install.md) says how they go together.

${valuesTable()}
`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(deploy('crd.yaml'), renderCrdYaml());
  // The chart's definition first: the renderings below include it.
  writeFileSync(join(CHART, 'templates', 'crd.yaml'), renderCrdTemplate());
  writeFileSync(deploy('install.yaml'), renderInstallYaml());
  writeFileSync(deploy('namespaced.yaml'), renderNamespacedYaml());
  writeFileSync(deploy('rbac.yaml'), renderRbacYaml());
  writeFileSync(deploy('alerts.yaml'), renderAlertsYaml());
  writeFileSync(REFERENCE, renderReference());
  console.log('wrote deploy/crd.yaml, the chart\'s templates/crd.yaml, deploy/install.yaml, deploy/namespaced.yaml, deploy/rbac.yaml, deploy/alerts.yaml and docs/reference.md');
}
