// The chaos sample's seed (test/chaos/seed.ts): from the commit the tests run on, from the sources'
// content outside a git checkout, or as given.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { headCommit, sampleSeed, seedOfHash } from '../chaos/seed.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A folder with a product file in it, as an unpacked tarball has. */
function tree(content: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'queen-seed-'));
  dirs.push(dir);
  mkdirSync(join(dir, 'plan'));
  writeFileSync(join(dir, 'plan', 'gates.ts'), content);
  return dir;
}

describe('the chaos sample seed', () => {
  it('is the commit checked out, its first 32 bits', () => {
    const dir = tree('a');
    const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, stdio: 'ignore' });
    git('init', '-q');
    git('-c', 'user.email=t@t', '-c', 'user.name=t', 'add', '.');
    git('-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-qm', 'one');
    const commit = headCommit(dir)!;
    expect(commit).toMatch(/^[0-9a-f]{40}$/);
    expect(sampleSeed({}, dir)).toEqual({ seed: Number.parseInt(commit.slice(0, 8), 16), from: `commit ${commit.slice(0, 12)}` });
    // Another commit, other cells.
    writeFileSync(join(dir, 'plan', 'gates.ts'), 'b');
    git('-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-qam', 'two');
    expect(sampleSeed({}, dir).seed).not.toBe(seedOfHash(commit));
  });

  it('outside a git checkout, the sources\' content: the same code the same seed, other code another', () => {
    const a = sampleSeed({}, tree('export const x = 1;'));
    expect(a.from).toMatch(/^the sources' content \(no git checkout; sha256 [0-9a-f]{12}\)$/);
    expect(sampleSeed({}, tree('export const x = 1;')).seed).toBe(a.seed);
    expect(sampleSeed({}, tree('export const x = 2;')).seed).not.toBe(a.seed);
  });

  it('as given by QUEEN_CHAOS_SEED, a new one with random, and a clear error for anything else', () => {
    expect(sampleSeed({ QUEEN_CHAOS_SEED: '480875' })).toEqual({ seed: 480875, from: 'QUEEN_CHAOS_SEED' });
    expect(sampleSeed({ QUEEN_CHAOS_SEED: 'random' }).from).toBe('QUEEN_CHAOS_SEED=random');
    expect(() => sampleSeed({ QUEEN_CHAOS_SEED: 'abc' })).toThrow('QUEEN_CHAOS_SEED: "abc" is not a seed (a whole number, or random)');
  });
});
