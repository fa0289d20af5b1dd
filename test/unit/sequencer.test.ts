// The order npm test starts the test bed's files in (test/sequencer.ts): the longest first, and
// the heavy ones (test/heavy.ts) planned never to overlap, with light ones beside them.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { giveBackFileSlot, HEAVY_FILES, holdHeavySlotForFile, takeHeavySlot } from '../heavy.ts';
import { plan, type Planned } from '../sequencer.ts';

/** Runs the plan the way vitest does: each file on the first worker that frees, a heavy one waiting for the slot. */
function simulate(order: Planned[], workers: number) {
  const free = Array.from({ length: workers }, () => 0);
  let heavyEnds = 0;
  const runs: { file: string; start: number; end: number; heavy: boolean }[] = [];
  for (const f of order) {
    const w = free.indexOf(Math.min(...free));
    const start = f.heavy ? Math.max(free[w]!, heavyEnds) : free[w]!;
    free[w] = start + f.seconds;
    if (f.heavy) heavyEnds = free[w]!;
    runs.push({ file: f.file, start, end: free[w]!, heavy: f.heavy });
  }
  return runs;
}

const file = (name: string, seconds: number, heavy = false): Planned => ({ file: name, seconds, heavy });

describe('the order of the test bed files', () => {
  it('starts the longest light files beside the longest heavy one, and the next heavy one as the last ends', () => {
    const files = [file('h1', 200, true), file('h2', 150, true), file('h3', 100, true), file('a', 300), file('b', 120), file('c', 90), file('d', 80), file('e', 60), file('f', 40)];
    const order = plan(files, 3);
    expect(order.map((f) => f.file)).toEqual(['h1', 'a', 'b', 'c', 'h2', 'd', 'e', 'f', 'h3']);
    const runs = simulate(order, 3);
    const heavy = runs.filter((r) => r.heavy);
    // Each heavy file starts as the one before it ends: none waits for the slot with a worker held.
    for (let i = 1; i < heavy.length; i++) expect(heavy[i]!.start).toBe(heavy[i - 1]!.end);
    expect(order).toHaveLength(files.length);
  });

  it('with only heavy files left, they queue one after another', () => {
    const order = plan([file('h1', 10, true), file('h2', 20, true), file('a', 5)], 2);
    expect(order.map((f) => f.file)).toEqual(['h2', 'a', 'h1']);
  });

  it('lists files that exist', () => {
    for (const f of HEAVY_FILES) expect(() => readFileSync(join(import.meta.dirname, '..', '..', f))).not.toThrow();
  });
});

describe('the heavy slot', () => {
  it('waits while another live process holds it; a holder gone, or a scenario of this process that never closed, holds nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'heavy-slot-'));
    const slot = join(dir, 'heavy-slot');
    // Held by another process that runs (vitest's own).
    writeFileSync(slot, `${process.ppid} other`);
    let taken: Awaited<ReturnType<typeof takeHeavySlot>> | null = null;
    const waiting = takeHeavySlot(dir, 'second').then((s) => (taken = s));
    await new Promise((r) => setTimeout(r, 1200));
    expect(taken).toBeNull();
    rmSync(slot);
    await waiting;
    expect(readFileSync(slot, 'utf8')).toBe(`${process.pid} second`);
    expect(taken!.waitedMs).toBeGreaterThanOrEqual(1000);
    taken!.release();
    expect(existsSync(slot)).toBe(false);
    // Held by a process that is gone: taken at once.
    writeFileSync(slot, '999999999 gone');
    const third = await takeHeavySlot(dir, 'third');
    expect(readFileSync(slot, 'utf8')).toBe(`${process.pid} third`);
    // Left by this process (its scenario never closed): taken at once too.
    const fourth = await takeHeavySlot(dir, 'fourth');
    expect(readFileSync(slot, 'utf8')).toBe(`${process.pid} fourth`);
    // The third's release leaves the fourth's slot alone.
    third.release();
    expect(existsSync(slot)).toBe(true);
    fourth.release();
  });

  it('is held by a test file from its first scenario to its end: its later scenarios do not queue behind another file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'heavy-slot-'));
    const slot = join(dir, 'heavy-slot');
    await holdHeavySlotForFile(dir, 'test/e2e/replace.test.ts', 'replace-1');
    expect(readFileSync(slot, 'utf8')).toBe(`${process.pid} replace-1`);
    // The file's second scenario keeps it: no new take, nothing waited.
    expect(await holdHeavySlotForFile(dir, 'test/e2e/replace.test.ts', 'replace-2')).toEqual({ waitedMs: 0 });
    expect(readFileSync(slot, 'utf8')).toBe(`${process.pid} replace-1`);
    // The file's end gives it back; the next heavy file of this process takes it anew.
    giveBackFileSlot();
    expect(existsSync(slot)).toBe(false);
    await holdHeavySlotForFile(dir, 'test/e2e/grow.test.ts', 'grow-1');
    expect(readFileSync(slot, 'utf8')).toBe(`${process.pid} grow-1`);
    // A file after it in the same process (its end missed) takes it over rather than waiting on itself.
    await holdHeavySlotForFile(dir, 'test/e2e/scale.test.ts', 'scale-1');
    expect(readFileSync(slot, 'utf8')).toBe(`${process.pid} scale-1`);
    giveBackFileSlot();
    expect(existsSync(slot)).toBe(false);
    giveBackFileSlot();
  });
});
