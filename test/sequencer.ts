// The order vitest starts test files in: the longest first, by the durations of a run on this
// machine (test/durations.json), so that with three scenarios at a time no long one starts last and
// runs alone at the end. Without it a clean clone (no vitest cache) starts the largest files first,
// and a short file of a long scenario (no-worker, 3 minutes in 60 lines) ended the run alone.
// A file not in the table counts as 100 s. Projects keep the order vitest gives them.
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const ROOT = join(import.meta.dirname, '..');
const DURATIONS: Record<string, number> = JSON.parse(readFileSync(join(import.meta.dirname, 'durations.json'), 'utf8'));
const UNKNOWN_SECONDS = 100;

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const base = await super.sort(files);
    const seconds = (s: TestSpecification) => DURATIONS[relative(ROOT, s.moduleId)] ?? UNKNOWN_SECONDS;
    const projects = [...new Set(base.map((s) => s.project.name))];
    return projects.flatMap((p) => base.filter((s) => s.project.name === p).sort((a, b) => seconds(b) - seconds(a)));
  }
}
