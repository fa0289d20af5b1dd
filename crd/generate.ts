// Writes deploy/crd.yaml from crd/schema.ts, and deploy/install.yaml (the CRD, then
// deploy/operator.yaml). `npm run generate`; test/unit/crd.test.ts fails when they are stale.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { customResourceDefinition } from './schema.ts';

const deploy = (file: string) => fileURLToPath(new URL(`../deploy/${file}`, import.meta.url));

export function renderCrdYaml(): string {
  return (
    '# Generated from crd/schema.ts by `npm run generate`: edit the schema, not this file.\n' +
    stringify(customResourceDefinition(), { lineWidth: 0 })
  );
}

export function renderInstallYaml(): string {
  return `${renderCrdYaml()}---\n${readFileSync(deploy('operator.yaml'), 'utf8')}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(deploy('crd.yaml'), renderCrdYaml());
  writeFileSync(deploy('install.yaml'), renderInstallYaml());
  console.log('wrote deploy/crd.yaml and deploy/install.yaml');
}
