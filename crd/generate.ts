// Writes what deploy/ serves from its sources: deploy/crd.yaml from crd/schema.ts and crd/backup.ts; deploy/install.yaml
// (the CRD, the ClusterRole of deploy/rbac.yaml and the cluster-wide operator of deploy/operator.yaml);
// deploy/namespaced.yaml (the same operator limited to the namespace it is applied in, the role
// bound there only); and the README's tables of annotations (crd/annotations.ts) and flags (the
// command of options.ts). `npm run generate`; test/unit/crd.test.ts fails when they are stale.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isMap, isSeq, parseAllDocuments, Scalar, stringify, type Document } from 'yaml';
import { operatorCommand } from '../options.ts';
import { USER_ANNOTATIONS } from './annotations.ts';
import { queenBackupDefinition } from './backup.ts';
import { customResourceDefinition } from './schema.ts';

const deploy = (file: string) => fileURLToPath(new URL(`../deploy/${file}`, import.meta.url));

export function renderCrdYaml(): string {
  return (
    '# Generated from crd/schema.ts and crd/backup.ts by `npm run generate`: edit the schemas, not this file.\n' +
    stringify(customResourceDefinition(), { lineWidth: 0 }) +
    '---\n' +
    stringify(queenBackupDefinition(), { lineWidth: 0 })
  );
}

export function renderInstallYaml(): string {
  return `${renderCrdYaml()}---\n${readFileSync(deploy('rbac.yaml'), 'utf8')}---\n${readFileSync(deploy('operator.yaml'), 'utf8')}`;
}

const NAMESPACED_HEADER = `# Generated from deploy/operator.yaml by \`npm run generate\`: the operator limited to one namespace.
# A cluster admin installs the definition and the role once:
#   kubectl apply -f deploy/crd.yaml -f deploy/rbac.yaml
# then each team, in its own namespace (the role is bound there only, and the operator watches
# only that namespace, on a task queue of its own):
#   kubectl -n <namespace> apply -f deploy/namespaced.yaml
# To watch more namespaces, add them to --namespace and bind the role in each (a RoleBinding
# like the one below); an operator not bound in a namespace it is told to watch says so once.
`;

/** deploy/operator.yaml made namespaced: no Namespace, a RoleBinding, --namespace and a task queue of its own. */
export function renderNamespacedYaml(): string {
  const docs = parseAllDocuments(readFileSync(deploy('operator.yaml'), 'utf8')) as Document[];
  const out: string[] = [];
  for (const doc of docs) {
    const kind = doc.get('kind') as string;
    if (kind === 'Namespace') continue;
    doc.commentBefore = null;
    doc.deleteIn(['metadata', 'namespace']);
    if (kind === 'ClusterRoleBinding') {
      doc.set('kind', 'RoleBinding');
      if (isMap(doc.contents)) doc.contents.commentBefore = ' The ClusterRole of deploy/rbac.yaml, bound in this namespace only.';
      const subjects = doc.get('subjects');
      if (isSeq(subjects)) for (const s of subjects.items) if (isMap(s)) s.delete('namespace');
    }
    if (kind === 'Deployment') {
      const container = ['spec', 'template', 'spec', 'containers', 0];
      const args = doc.getIn([...container, 'args']);
      if (isSeq(args)) {
        const arg = new Scalar('--namespace=$(POD_NAMESPACE)');
        arg.type = Scalar.QUOTE_DOUBLE;
        args.add(arg);
      }
      const env = doc.getIn([...container, 'env']);
      if (isSeq(env)) {
        const podNamespace = doc.createNode({ name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } });
        const valueFrom = podNamespace.get('valueFrom', true);
        if (isMap(valueFrom)) valueFrom.flow = true;
        env.items.splice(1, 0, podNamespace as never);
        for (const e of env.items) {
          if (isMap(e) && e.get('name') === 'QUEEN_TASK_QUEUE') {
            e.set('value', 'queen-operator-$(POD_NAMESPACE)');
            e.commentBefore = ' A task queue of its own: several namespaced operators may share one Temporal namespace.';
          }
        }
      }
    }
    doc.directives!.docStart = null;
    out.push(doc.toString({ lineWidth: 0 }));
  }
  return NAMESPACED_HEADER + out.join('---\n').replace(/^#\s+namespace: queen-system\n/gm, '');
}

const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** The README's table of the annotations a person sets. */
export function annotationTable(): string {
  const rows = USER_ANNOTATIONS.map((a) => `| \`${a.annotation}\` | ${cell(a.values)} | ${cell(a.effect)} |`);
  return ['| annotation | values | what it does |', '|---|---|---|', ...rows].join('\n');
}

/** The README's table of the operator's flags: every option of the command, its variable and default. */
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

const README = fileURLToPath(new URL('../README.md', import.meta.url));

/** The README with its generated tables (between `<!-- generated: NAME -->` and `<!-- end -->`) made afresh. */
export function renderReadme(text: string = readFileSync(README, 'utf8')): string {
  const tables: Record<string, () => string> = { annotations: annotationTable, flags: flagTable };
  return text.replace(/(<!-- generated: (\w+) \(npm run generate\) -->\n)(?:(?!<!-- (?:generated|end))[\s\S])*(<!-- end -->)/g, (whole, open: string, name: string, close: string) => {
    const table = tables[name];
    return table ? `${open}${table()}\n${close}` : whole;
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(deploy('crd.yaml'), renderCrdYaml());
  writeFileSync(deploy('install.yaml'), renderInstallYaml());
  writeFileSync(deploy('namespaced.yaml'), renderNamespacedYaml());
  writeFileSync(README, renderReadme());
  console.log("wrote deploy/crd.yaml, deploy/install.yaml, deploy/namespaced.yaml and the README's tables");
}
