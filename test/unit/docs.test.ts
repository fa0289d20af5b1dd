// The documentation a user reads: README.md and docs/. Every relative link leads to a file that
// exists (and to a heading of it, for a link with #anchor); every page of docs/ is linked from the
// README; the README's list of what the tests need names every package the tests look for; and the
// Temporal namespace the docs and manifests name is the one the operator uses by default.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { operatorCommand } from '../../options.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

/** README.md and every Markdown file under docs/, relative to the project. */
function pages(): string[] {
  const out = ['README.md'];
  const walk = (dir: string) => {
    for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const rel = `${dir}/${e.name}`;
      if (e.isDirectory()) walk(rel);
      else if (e.name.endsWith('.md')) out.push(rel);
    }
  };
  walk('docs');
  return out;
}

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens. */
export function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchors(file: string): Set<string> {
  const text = read(file).replace(/^```[\s\S]*?^```$/gm, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchorOf(m[1]!)));
}

/** The relative links of a page: [text](target), outside code blocks and code spans. */
function links(file: string): { target: string; line: number }[] {
  const text = read(file).replace(/^```[\s\S]*?^```$/gm, (block) => block.replace(/[^\n]/g, ''));
  const out: { target: string; line: number }[] = [];
  text.split('\n').forEach((l, i) => {
    for (const m of l.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)\)/g)) {
      if (!/^[a-z]+:/i.test(m[1]!)) out.push({ target: m[1]!, line: i + 1 });
    }
  });
  return out;
}

/** The Temporal namespaces a line names: `temporal operator namespace create ... NAME`, `temporal ... --namespace NAME`. */
function temporalNamespacesOf(line: string): string[] {
  const cli = /\btemporal (?:operator|workflow|server)\b(.*)$/.exec(line)?.[1];
  if (!cli) return [];
  const flag = /(?:--namespace|-n)[ =]([A-Za-z0-9_.<>-]+)/.exec(cli)?.[1];
  const positional = /namespace (?:create|update)\b(?:\s+--?\S+(?:\s+(?!-)[^\s`]+)?)*\s+([A-Za-z][\w.-]*)\s*`?[.,;)]*\s*$/.exec(cli)?.[1];
  return [flag, positional].filter((n): n is string => !!n && !n.startsWith('<'));
}

describe('the documentation', () => {
  it.each(pages())('%s has no dead relative link', (page) => {
    const dead: string[] = [];
    for (const { target, line } of links(page)) {
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const file = path ? relative(ROOT, join(ROOT, dirname(page), path)) : page;
      if (!existsSync(join(ROOT, file))) dead.push(`${page}:${line}: ${target} (no file ${file})`);
      else if (anchor && statSync(join(ROOT, file)).isFile() && file.endsWith('.md') && !anchors(file).has(anchor)) dead.push(`${page}:${line}: ${target} (no heading #${anchor} in ${file})`);
    }
    expect(dead).toEqual([]);
  });

  it('links every page of docs/ from the README', () => {
    const linked = new Set(links('README.md').map((l) => l.target.split('#')[0]));
    expect(pages().filter((p) => p !== 'README.md' && !linked.has(p))).toEqual([]);
  });

  it('makes anchors as GitHub does, and reads the old namespace line of docs/temporal.md as naming queen-operator', () => {
    expect(anchorOf('TLS, mutual TLS, API keys')).toBe('tls-mutual-tls-api-keys');
    expect(anchorOf('Many clusters (`npm run bench -- scale`)')).toBe('many-clusters-npm-run-bench----scale');
    expect(temporalNamespacesOf('visible in the Web UI: `temporal operator namespace create --retention 7d queen-operator`.')).toEqual(['queen-operator']);
  });

  it("names, among what the tests need, every Debian package the tests look for (Chromium, promtool's prometheus)", () => {
    const readme = read('README.md');
    const need = readme.slice(readme.indexOf('What the sandbox and the tests need'), readme.indexOf('\n## ', readme.indexOf('What the sandbox and the tests need')));
    // .ci/run installs them; each must be among what the README says the tests need.
    const installed = [...read('.ci/run').matchAll(/apt-get install -y -q (?:--no-install-recommends )?(\S+)/g)].map((m) => m[1]!);
    expect(installed).toEqual(expect.arrayContaining(['chromium']));
    for (const pkg of new Set(installed)) expect(need, `the README's list of what the tests need names ${pkg}`).toContain(`\`${pkg}\``);
  });

  it('names one Temporal namespace, the one the operator uses by default', () => {
    const byDefault = operatorCommand().options.find((o) => o.long === '--temporal-namespace')!.defaultValue as string;
    const named: string[] = [];
    const files = [...pages(), 'docker-compose.yml', ...readdirSync(join(ROOT, 'deploy')).filter((f) => f.endsWith('.yaml')).map((f) => `deploy/${f}`)];
    for (const file of files) {
      for (const line of read(file).split('\n')) {
        named.push(...temporalNamespacesOf(line).map((n) => `${file}: ${n}`));
        const env = /TEMPORAL_NAMESPACE\b.*value: "?([\w.-]+)"?/.exec(line)?.[1];
        if (env) named.push(`${file}: ${env}`);
      }
    }
    expect(named.length).toBeGreaterThan(0);
    expect(named.filter((n) => !n.endsWith(`: ${byDefault}`))).toEqual([]);
  });
});
