// The order vitest starts test files in, by the durations of a run on this machine
// (test/durations.json). Vitest gives the next file to the first worker that frees, so the order
// is planned the same way: on each worker as it frees, the longest file left, but a heavy one
// (test/heavy.ts: at most one runs at a time) only once the last heavy one is due to end, and a
// light one in the meantime. Longest first, so that no long scenario starts last and runs alone at
// the end (without it a clean clone starts the largest files first, and a short file of a long
// scenario, no-worker, ended the run alone); heavy ones spread out, so none waits long for the slot
// with a worker held. A file not in the table counts as 100 s. Projects keep the order vitest gives.
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { HEAVY_FILES } from './heavy.ts';

const ROOT = join(import.meta.dirname, '..');
const DURATIONS: Record<string, number> = JSON.parse(readFileSync(join(import.meta.dirname, 'durations.json'), 'utf8'));
const UNKNOWN_SECONDS = 100;

export interface Planned {
  file: string;
  seconds: number;
  heavy: boolean;
}

/** The order for `workers` workers: see above. */
export function plan<T extends Planned>(files: T[], workers: number): T[] {
  const left = [...files].sort((a, b) => b.seconds - a.seconds);
  const free = Array.from({ length: Math.max(1, workers) }, () => 0);
  let heavyEnds = 0;
  const out: T[] = [];
  while (left.length) {
    const w = free.indexOf(Math.min(...free));
    const now = free[w]!;
    const heavyDue = now >= heavyEnds;
    let i = left.findIndex((f) => f.heavy === heavyDue);
    if (i < 0) i = 0;
    const f = left.splice(i, 1)[0]!;
    const start = f.heavy ? Math.max(now, heavyEnds) : now;
    free[w] = start + f.seconds;
    if (f.heavy) heavyEnds = free[w]!;
    out.push(f);
  }
  return out;
}

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const base = await super.sort(files);
    const workers = Number(this.ctx.config.maxWorkers) || 1;
    const projects = [...new Set(base.map((s) => s.project.name))];
    return projects.flatMap((p) => {
      const planned = base
        .filter((s) => s.project.name === p)
        .map((spec) => {
          const file = relative(ROOT, spec.moduleId);
          return { spec, file, seconds: DURATIONS[file] ?? UNKNOWN_SECONDS, heavy: HEAVY_FILES.has(file) };
        });
      return plan(planned, workers).map((x) => x.spec);
    });
  }
}
