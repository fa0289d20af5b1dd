// What the cluster-wide scenarios (install, helm: the `cluster-wide` project, a test bed of their
// own, one file after the other) share: the README's commands, run word for word (its `## `
// sections, their fenced blocks, a user's shell with the test bed's kubectl, Helm and kubeconfig),
// and a test bed left as found: the namespace queen-system, the cluster-wide objects and the
// README's example cluster (namespace queen) gone.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { kubectl, testbed, waitFor, type Scenario } from './harness.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const README = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');

/** The text of one `## ` section of the README. */
export function section(title: string): string {
  const start = README.indexOf(`\n## ${title}\n`);
  if (start < 0) throw new Error(`the README has no section "${title}"`);
  const end = README.indexOf('\n## ', start + 4);
  return README.slice(start, end < 0 ? undefined : end);
}

/** Its fenced blocks, with their language. */
export function blocks(text: string): { lang: string; body: string }[] {
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, body: m[2]! }));
}

/** The one `sh` block of a section that contains `text`. */
export function command(title: string, text: string): string {
  const found = blocks(section(title)).filter((b) => b.lang === 'sh' && b.body.includes(text));
  if (found.length !== 1) throw new Error(`the README's section "${title}" has ${found.length} sh blocks with "${text}", not one`);
  return found[0]!.body;
}

/** The same command with the test bed's Temporal frontend: the one thing a user changes. */
export function withTestbedTemporal(script: string): string {
  const changed = script.replace(/temporal-frontend\.temporal\.svc\.cluster\.local:7233/g, testbed().temporal.address);
  if (changed === script) throw new Error('the command names no Temporal address to change');
  return changed;
}

/** Runs commands as a user's shell would, with the test bed's kubectl and Helm and its kubeconfig. */
export function bash(script: string): Promise<{ code: number; out: string }> {
  const tb = testbed();
  return new Promise((resolve) => {
    // No stdin: bash takes a socket on stdin (a Node.js pipe) for a remote shell and reads
    // /etc/bash.bashrc, whose unset PS1 then fails under -u.
    const p = spawn('bash', ['-euo', 'pipefail', '-c', script], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, PATH: `${dirname(tb.tools.kubectl)}:${dirname(tb.tools.helm)}:${process.env.PATH}`, KUBECONFIG: tb.kubeconfigPath },
    });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('close', (code) => resolve({ code: code ?? -1, out }));
  });
}

/** The namespaces the README's commands use, and the cluster-wide objects of the install. */
const NAMESPACES = ['queen', 'queen-system'];

/** Waits until an earlier scenario's namespaces are gone (a namespace being deleted takes no new objects). */
export async function awaitNamespacesGone(): Promise<void> {
  await waitFor(
    `the namespaces ${NAMESPACES.join(', ')} of an earlier scenario gone`,
    async () => (await kubectl(['get', 'namespace', ...NAMESPACES, '--ignore-not-found', '-o', 'name'])).stdout.trim() === '',
    180_000,
  );
}

/**
 * Removes what the scenario installed: its example cluster (the scenario's namespace queen, and the
 * cluster's workflows), the operator's namespace, and the cluster-wide objects (the definition
 * last, once no QueenCluster is left).
 */
export async function removeClusterWide(s: Scenario | null): Promise<void> {
  s?.clusters.add('queen');
  await s?.close();
  await kubectl(['delete', 'namespace', ...NAMESPACES, '--ignore-not-found', '--wait=true', '--timeout=180s']);
  await kubectl(['delete', 'clusterrolebinding,clusterrole', 'queen-operator', '--ignore-not-found']);
  await kubectl(['delete', 'crd', ...OPERATOR_CRDS, '--ignore-not-found']);
}

/** The operator's definitions (deploy/crd.yaml), which the chart installs and keeps on uninstall. */
export const OPERATOR_CRDS = ['queenclusters.queenmq.com', 'queenbackups.queenmq.com'];
