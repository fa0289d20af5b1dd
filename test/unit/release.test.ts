// The release workflow (.github/workflows/release.yml) and the Dockerfile it builds. The workflow
// cannot run here (no GitHub Actions, no Docker engine, no registry to push to), so this test
// checks what it names against the files: the Dockerfile and its stages, the chart it packages and
// the manifests it attaches exist; the image it pushes (ghcr.io/<the repository>) is the one the
// chart's values name, for the repository the chart names; the tag it takes is the chart's and
// package.json's version; the Helm it installs is the one that renders the manifests here; and
// every file the image's entrypoint imports is among the files .dockerignore lets in.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { contextFiles, parseDockerfile } from '../testbed/image.ts';
import { versions } from '../testbed/tools.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

interface Step {
  uses?: string;
  run?: string;
  with?: Record<string, string>;
}
const workflow = parse(read('.github/workflows/release.yml')) as { on: { push: { tags: string[] } }; permissions: Record<string, string>; jobs: { release: { steps: Step[] } } };
const steps = workflow.jobs.release.steps;
const action = (name: string) => steps.find((s) => s.uses?.startsWith(`${name}@`));
const chart = parse(read('charts/queen-operator/Chart.yaml')) as { version: string; appVersion: string; home: string };
const values = parse(read('charts/queen-operator/values.yaml')) as { image: { repository: string; tag: string } };

describe('the release workflow', () => {
  it('runs on a version tag and may push the image and write the release', () => {
    expect(workflow.on.push.tags).toEqual(['v*']);
    expect(workflow.permissions).toMatchObject({ contents: 'write', packages: 'write' });
  });

  it("builds the Dockerfile for amd64 and arm64 and pushes it to this repository's path, tagged with the version", () => {
    const build = action('docker/build-push-action')!;
    expect(build.with).toMatchObject({ context: '.', file: 'Dockerfile', push: true });
    expect(String(build.with!.platforms).split(',').sort()).toEqual(['linux/amd64', 'linux/arm64']);
    expect(existsSync(join(ROOT, build.with!.file!))).toBe(true);
    expect(build.with!.tags).toBe('${{ steps.meta.outputs.image }}:${{ steps.meta.outputs.version }}');
    const meta = steps.find((s) => s.run?.includes('image="ghcr.io/${GITHUB_REPOSITORY,,}"'))!;
    expect(meta.run).toContain('version="${GITHUB_REF_NAME#v}"');
    for (const file of meta.run!.matchAll(/(charts\/\S+\.yaml)/g)) expect(existsSync(join(ROOT, file[1]!)), file[1]).toBe(true);
    expect(action('docker/setup-qemu-action')).toBeDefined();
    expect(action('docker/setup-buildx-action')).toBeDefined();
    expect(action('docker/login-action')!.with).toMatchObject({ registry: 'ghcr.io' });
  });

  it('publishes the image the chart installs: its image.repository is ghcr.io/<the repository the chart names>, its tag the version', () => {
    const repository = new URL(chart.home).pathname.replace(/^\/|\/$/g, '').toLowerCase();
    expect(values.image.repository).toBe(`ghcr.io/${repository}`);
    expect(values.image.tag).toBe('');
    const pkg = JSON.parse(read('package.json')) as { version: string };
    expect([chart.version, chart.appVersion]).toEqual([pkg.version, pkg.version]);
    // And so do the rendered manifests (npm run generate).
    for (const file of ['deploy/install.yaml', 'deploy/namespaced.yaml']) expect(read(file)).toContain(`image: ${values.image.repository}:${pkg.version}\n`);
  });

  it('attaches the rendered manifests and the packaged chart, packaged with the Helm that renders them here', () => {
    const release = steps.find((s) => s.run?.includes('gh release create'))!;
    const assets = [...release.run!.matchAll(/(deploy\/\S+\.yaml)/g)].map((m) => m[1]!);
    expect(assets.sort()).toEqual(['deploy/alerts.yaml', 'deploy/crd.yaml', 'deploy/install.yaml', 'deploy/namespaced.yaml', 'deploy/rbac.yaml']);
    for (const file of assets) expect(existsSync(join(ROOT, file)), file).toBe(true);
    expect(steps.find((s) => s.run?.includes('helm package'))!.run).toContain('helm package charts/queen-operator --destination dist');
    expect(release.run).toContain('dist/queen-operator-${{ steps.meta.outputs.version }}.tgz');
    expect(action('azure/setup-helm')!.with!.version).toBe(versions().HELM_VERSION);
  });
});

describe('the Dockerfile', () => {
  const stages = parseDockerfile(read('Dockerfile'));

  it('has a build stage the final stage copies from, and a final stage that runs main.ts as uid 65532', () => {
    expect(stages.map((s) => s.name)).toEqual(['build', '1']);
    const final = stages.at(-1)!;
    for (const copy of final.instructions.filter((i) => i.op === 'COPY')) {
      const from = /--from=(\S+)/.exec(copy.args)?.[1];
      if (from) expect(stages.slice(0, -1).map((s) => s.name)).toContain(from);
    }
    const entry = JSON.parse(final.instructions.find((i) => i.op === 'ENTRYPOINT')!.args) as string[];
    expect(entry.at(-1)).toBe('main.ts');
    expect(final.instructions.find((i) => i.op === 'USER')!.args).toBe('65532:65532');
  });

  it('lets in, through .dockerignore, every file the entrypoint imports, and the bundle its ENV names is built', () => {
    const files = new Set(contextFiles());
    const missing: string[] = [];
    const seen = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      if (!files.has(file)) missing.push(file);
      if (!existsSync(join(ROOT, file))) return;
      for (const m of read(file).matchAll(/^(?:import|export)\b[^'"]*?from\s+'(\.{1,2}\/[^']+)'|import\('(\.{1,2}\/[^']+)'\)/gm)) {
        visit(normalize(join(dirname(file), m[1] ?? m[2]!)));
      }
    };
    visit('main.ts');
    expect(missing).toEqual([]);
    expect(seen.size).toBeGreaterThan(20);
    const env = stages.at(-1)!.instructions.find((i) => i.op === 'ENV')!.args;
    const bundle = /QUEEN_WORKFLOW_BUNDLE=\/app\/(\S+)/.exec(env)![1]!;
    expect(stages[0]!.instructions.filter((i) => i.op === 'RUN').some((i) => i.args.includes(`writeFileSync('${bundle}'`))).toBe(true);
  });
});
