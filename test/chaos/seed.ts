// The seed of `npm test`'s chaos sample: drawn from the code it runs on, so that each commit runs
// other cells of the matrix and, over many commits, all of them; the same commit draws the same
// cells again, so a failing draw is run again with its seed, never waved off as bad luck.
// QUEEN_CHAOS_SEED=N gives a seed, QUEEN_CHAOS_SEED=random a new one each run.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface SampleSeed {
  seed: number;
  /** Where it came from, in words: "commit 1a2b3c4d", "QUEEN_CHAOS_SEED", ... */
  from: string;
}

/** The product's folders and files, whose content makes the seed outside a git checkout. */
const SOURCES = ['activities', 'crd', 'plan', 'watcher', 'workflows', 'deploy', 'main.ts', 'worker.ts', 'options.ts', 'connect.ts', 'health.ts', 'identity.ts', 'memory.ts', 'metrics.ts', 'package-lock.json'];

/** A seed from the first 8 hex digits of a hash (0 to 4294967295). */
export const seedOfHash = (hex: string) => Number.parseInt(hex.slice(0, 8), 16);

/** The commit checked out, or null outside a git checkout (an unpacked tarball, an image). */
export function headCommit(cwd = root): string | null {
  try {
    const out = execFileSync('git', ['rev-parse', 'HEAD'], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return /^[0-9a-f]{40,64}$/.test(out) ? out : null;
  } catch {
    return null;
  }
}

/** A hash of the product's sources as they are on disk: the code the sample runs on, without git. */
export function sourcesHash(dir = root): string {
  const hash = createHash('sha256');
  const walk = (path: string) => {
    const st = statSync(path, { throwIfNoEntry: false });
    if (!st) return;
    if (st.isDirectory()) {
      for (const name of readdirSync(path).sort()) walk(join(path, name));
      return;
    }
    hash.update(relative(dir, path)).update('\0').update(readFileSync(path)).update('\0');
  };
  for (const s of SOURCES) walk(join(dir, s));
  return hash.digest('hex');
}

/** The sample's seed: QUEEN_CHAOS_SEED if set, else the commit checked out, else the sources' hash. */
export function sampleSeed(env: NodeJS.ProcessEnv = process.env, dir = root): SampleSeed {
  const given = env.QUEEN_CHAOS_SEED?.trim();
  if (given === 'random') return { seed: Math.floor(Math.random() * 2 ** 32), from: 'QUEEN_CHAOS_SEED=random' };
  if (given) {
    const seed = Number(given);
    if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`QUEEN_CHAOS_SEED: "${given}" is not a seed (a whole number, or random)`);
    return { seed, from: 'QUEEN_CHAOS_SEED' };
  }
  const commit = headCommit(dir);
  if (commit) return { seed: seedOfHash(commit), from: `commit ${commit.slice(0, 12)}` };
  const sources = sourcesHash(dir);
  return { seed: seedOfHash(sources), from: `the sources' content (no git checkout; sha256 ${sources.slice(0, 12)})` };
}
