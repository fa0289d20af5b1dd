// The API: the CRD YAML in deploy/ is what crd/schema.ts renders, the TypeScript types follow the
// schema, and the defaults come from it.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { parse } from 'yaml';
import { withDefaults } from '../../crd/defaults.ts';
import { generatedCoreSchemas } from '../../crd/generate-core.ts';
import { flagTable, renderCrdYaml, renderInstallYaml, renderNamespacedYaml, renderReadme } from '../../crd/generate.ts';
import { operatorCommand } from '../../options.ts';
import { customResourceDefinition, type QueenClusterSpec, type QueenClusterStatus, type StoredSpec } from '../../crd/schema.ts';

const file = (name: string) => readFileSync(fileURLToPath(new URL(`../../deploy/${name}`, import.meta.url)), 'utf8');

describe('the QueenCluster API', () => {
  it('deploy/crd.yaml and deploy/install.yaml are generated from crd/schema.ts (npm run generate)', () => {
    expect(file('crd.yaml')).toBe(renderCrdYaml());
    expect(file('install.yaml')).toBe(renderInstallYaml());
    expect(file('namespaced.yaml')).toBe(renderNamespacedYaml());
  });

  it("the README's tables of annotations and flags are rendered from crd/annotations.ts and the operator's command (npm run generate)", () => {
    const readme = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
    expect(readme).toBe(renderReadme(readme));
    expect(readme).toContain('<!-- generated: annotations (npm run generate) -->\n| annotation | values | what it does |');
    expect(readme).toContain(`<!-- generated: flags (npm run generate) -->\n${flagTable()}\n<!-- end -->`);
    // Every flag, with its variable.
    for (const o of operatorCommand().options.filter((x) => x.long !== '--help')) expect(flagTable()).toContain(`| \`${o.flags}\` | \`${o.envVar}\` |`);
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
      adminTokenSecret: true, networkPolicy: true, link: true, standby: true,
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
    expect(docs.map((d) => d.kind)).toEqual(['CustomResourceDefinition', 'ClusterRole', 'Namespace', 'ServiceAccount', 'ClusterRoleBinding', 'Deployment', 'PodDisruptionBudget', 'Service']);
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
    expect(docs.map((d) => d.kind)).toEqual(['ServiceAccount', 'RoleBinding', 'Deployment', 'PodDisruptionBudget', 'Service']);
    expect(docs.every((d) => d.metadata.namespace === undefined)).toBe(true);
    expect(docs[1].roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'queen-operator' });
    const container = docs[2].spec.template.spec.containers[0];
    expect(container.args).toContain('--namespace=$(POD_NAMESPACE)');
    const env = Object.fromEntries(container.env.map((e: { name: string; value?: string }) => [e.name, e.value ?? 'from']));
    expect(env.QUEEN_TASK_QUEUE).toBe('queen-operator-$(POD_NAMESPACE)');
    // POD_NAMESPACE comes before the variables that refer to it.
    const names = container.env.map((e: { name: string }) => e.name);
    expect(names.indexOf('POD_NAMESPACE')).toBeLessThan(names.indexOf('QUEEN_TASK_QUEUE'));
  });
});
