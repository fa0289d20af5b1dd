// The API: the CRD YAML in deploy/ is what crd/schema.ts renders, the TypeScript types follow the
// schema, and the defaults come from it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { parse } from 'yaml';
import { withDefaults } from '../../crd/defaults.ts';
import { generatedCoreSchemas } from '../../crd/generate-core.ts';
import { CHART, flagTable, renderAlertsYaml, renderCrdTemplate, renderCrdYaml, renderInstallYaml, renderNamespacedYaml, renderRbacYaml, renderReference, specTable, valuesTable } from '../../crd/generate.ts';
import { USER_ANNOTATIONS } from '../../crd/annotations.ts';
import { operatorCommand } from '../../options.ts';
import { customResourceDefinition, type QueenClusterSpec, type QueenClusterStatus, type StoredSpec } from '../../crd/schema.ts';

const file = (name: string) => readFileSync(fileURLToPath(new URL(`../../deploy/${name}`, import.meta.url)), 'utf8');

describe('the QueenCluster API', () => {
  it('deploy/crd.yaml and the chart\'s definition are generated from crd/schema.ts; the install manifests are the chart rendered (npm run generate)', () => {
    expect(file('crd.yaml')).toBe(renderCrdYaml());
    expect(readFileSync(join(CHART, 'templates', 'crd.yaml'), 'utf8')).toBe(renderCrdTemplate());
    // Rendered with the Helm that test/testbed/build-tools.sh builds: without it this fails, saying so.
    expect(file('install.yaml')).toBe(renderInstallYaml());
    expect(file('namespaced.yaml')).toBe(renderNamespacedYaml());
    expect(file('rbac.yaml')).toBe(renderRbacYaml());
    expect(file('alerts.yaml')).toBe(renderAlertsYaml());
  });

  it('docs/reference.md is rendered from the flags, crd/annotations.ts and crd/schema.ts (npm run generate)', () => {
    const reference = readFileSync(fileURLToPath(new URL('../../docs/reference.md', import.meta.url)), 'utf8');
    expect(reference).toBe(renderReference());
    // Every flag, with its variable; every annotation; every field of the spec, nested ones by their path.
    for (const o of operatorCommand().options.filter((x) => x.long !== '--help')) expect(flagTable()).toContain(`| \`${o.flags}\` | \`${o.envVar}\` |`);
    for (const a of USER_ANNOTATIONS) expect(reference).toContain(`| \`${a.annotation}\` |`);
    for (const field of ['version', 'storage.size', 'upgrade.onFailure', 'env', 'networkPolicy.enabled']) expect(specTable()).toContain(`| \`${field}\` |`);
    const spec = customResourceDefinition().spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties;
    for (const field of Object.keys(spec)) expect(specTable()).toContain(`| \`${field}\` |`);
    // Every value of the chart says what it sets.
    expect(valuesTable().split('\n').filter((row) => row.endsWith('|  |'))).toEqual([]);
    expect(valuesTable()).toContain('| `temporal.apiKey.secretName` |');
  });

  it("crd/core-schemas.ts is generated from the OpenAPI spec of the test bed's Kubernetes (npm run generate:core)", () => {
    const committed = readFileSync(fileURLToPath(new URL('../../crd/core-schemas.ts', import.meta.url)), 'utf8');
    expect(committed).toBe(generatedCoreSchemas());
  });

  it('the types follow the schema', () => {
    expectTypeOf<QueenClusterSpec['replicas']>().toEqualTypeOf<1 | 3 | 5 | undefined>();
    expectTypeOf<QueenClusterSpec['version']>().toEqualTypeOf<string>();
    expectTypeOf<QueenClusterSpec['secretName']>().toEqualTypeOf<string>();
    expectTypeOf<StoredSpec['replicas']>().toEqualTypeOf<1 | 3 | 5>();
    expectTypeOf<StoredSpec['storage']['size']>().toEqualTypeOf<string>();
    expectTypeOf<StoredSpec['podAntiAffinity']>().toEqualTypeOf<'required' | 'preferred'>();
    expectTypeOf<NonNullable<QueenClusterStatus['commits']>>().toEqualTypeOf<boolean>();
    expectTypeOf<QueenClusterStatus['commits']>().toEqualTypeOf<boolean | null | undefined>();
    // The embedded core types are typed as the core API has them.
    expectTypeOf<NonNullable<QueenClusterSpec['env']>[number]['name']>().toEqualTypeOf<string>();
    expectTypeOf<NonNullable<NonNullable<QueenClusterSpec['env']>[number]['valueFrom']>['secretKeyRef']>().toEqualTypeOf<
      { key: string; name: string; optional?: boolean } | undefined
    >();
    expectTypeOf<NonNullable<NonNullable<QueenClusterSpec['resources']>['limits']>[string]>().toEqualTypeOf<number | string>();
    expectTypeOf<NonNullable<QueenClusterSpec['tolerations']>[number]['operator']>().toEqualTypeOf<'Equal' | 'Exists' | '' | undefined>();
    // A change to the schema that the types do not see would fail here: every schema key is a type key.
    const crd = customResourceDefinition();
    const specKeys = Object.keys(crd.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties).sort();
    const typed: Record<keyof Required<QueenClusterSpec>, true> = {
      version: true, image: true, imagePullPolicy: true, imagePullSecrets: true, replicas: true, secretName: true,
      storage: true, resources: true, podAntiAffinity: true, zoneSpread: true, nodeSelector: true, tolerations: true,
      priorityClassName: true, proxy: true, kafka: true, env: true, podLabels: true, podAnnotations: true, port: true,
      raftPort: true, clusterDomain: true, minReadySeconds: true, terminationGracePeriodSeconds: true, upgrade: true,
      adminTokenSecret: true, networkPolicy: true, backup: true, bootstrap: true, link: true, standby: true,
    };
    expect(Object.keys(typed).sort()).toEqual(specKeys);
  });

  it('the in-memory defaults are the schema defaults, and nested ones apply without their parent', () => {
    const spec = withDefaults({ version: '2.6.0', secretName: 'queen' });
    expect(spec).toMatchObject({
      image: 'ghcr.io/queen-mq/queen',
      imagePullPolicy: 'IfNotPresent',
      replicas: 3,
      storage: { size: '50Gi' },
      podAntiAffinity: 'required',
      zoneSpread: 'ScheduleAnyway',
      proxy: { enabled: false, port: 6711 },
      kafka: { enabled: false, port: 9092 },
      port: 6632,
      raftPort: 7400,
      clusterDomain: 'cluster.local',
      minReadySeconds: 30,
      terminationGracePeriodSeconds: 90,
      networkPolicy: { enabled: true },
    });
    expect(withDefaults({ version: '2.6.0', secretName: 'q', minReadySeconds: 0, storage: { size: '10Gi' } })).toMatchObject({
      minReadySeconds: 0,
      storage: { size: '10Gi' },
    });
  });

  it('prints the columns of the README, with the role and the message only in -o wide', () => {
    const cols = customResourceDefinition().spec.versions[0]!.additionalPrinterColumns;
    expect(cols.map((c) => c.name)).toEqual(['Version', 'Voters', 'Commits', 'Phase', 'Role', 'Message', 'Age']);
    expect(cols.find((c) => c.name === 'Message')).toMatchObject({ priority: 1 });
    expect(cols.find((c) => c.name === 'Role')).toMatchObject({ priority: 1 });
  });

  it('install.yaml holds the CRD, the namespace, a least-privilege ClusterRole and the Deployment', () => {
    const docs = file('install.yaml')
      .split(/^---$/m)
      .map((d) => parse(d))
      .filter(Boolean);
    expect(docs.map((d) => d.kind).sort()).toEqual(['ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'CustomResourceDefinition', 'Deployment', 'Namespace', 'PodDisruptionBudget', 'Service', 'ServiceAccount']);
    // The definitions outlive a helm uninstall, with the QueenClusters and their backups.
    for (const crd of docs.filter((d) => d.kind === 'CustomResourceDefinition')) expect(crd.metadata.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
    const role = docs.find((d) => d.kind === 'ClusterRole');
    const resources = role.rules.flatMap((r: { resources: string[] }) => r.resources);
    expect(resources).not.toContain('secrets');
    expect(role.rules.every((r: { verbs: string[] }) => !r.verbs.includes('*'))).toBe(true);
  });

  it('namespaced.yaml binds the same role in its namespace only, watches that namespace on a task queue of its own', () => {
    const docs = file('namespaced.yaml')
      .split(/^---$/m)
      .map((d) => parse(d))
      .filter(Boolean);
    expect(docs.map((d) => d.kind).sort()).toEqual(['Deployment', 'PodDisruptionBudget', 'RoleBinding', 'Service', 'ServiceAccount']);
    expect(docs.every((d) => d.metadata.namespace === undefined)).toBe(true);
    expect(docs.find((d) => d.kind === 'RoleBinding').roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'queen-operator' });
    const container = docs.find((d) => d.kind === 'Deployment').spec.template.spec.containers[0];
    expect(container.args).toContain('--namespace=$(POD_NAMESPACE)');
    const env = Object.fromEntries(container.env.map((e: { name: string; value?: string }) => [e.name, e.value ?? 'from']));
    expect(env.QUEEN_TASK_QUEUE).toBe('queen-operator-$(POD_NAMESPACE)');
    // POD_NAMESPACE comes before the variables that refer to it.
    const names = container.env.map((e: { name: string }) => e.name);
    expect(names.indexOf('POD_NAMESPACE')).toBeLessThan(names.indexOf('QUEEN_TASK_QUEUE'));
  });
});
