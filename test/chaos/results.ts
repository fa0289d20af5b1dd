// The chaos runs' results: one JSON line per cell in a file (QUEEN_CHAOS_RESULTS, default
// .cache/chaos-results.jsonl), the selection of cells (QUEEN_CHAOS_CELLS), a seeded random number
// generator, and the table `npm run chaos` prints.
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CellResult } from './cell.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

export const resultsFile = () => process.env.QUEEN_CHAOS_RESULTS ?? join(root, '.cache', 'chaos-results.jsonl');

/** Appends a cell's result (or a soak's) to the results file. */
export function record(r: CellResult | SoakResult): void {
  const file = resultsFile();
  mkdirSync(dirname(file), { recursive: true });
  appendFileSync(file, JSON.stringify(r) + '\n');
}

export function readResults(file = resultsFile()): (CellResult | SoakResult)[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

/**
 * Whether a cell is selected by QUEEN_CHAOS_CELLS: comma-separated `<operation>[:<fault>]`, where
 * the operation may be `*` and the fault `crash` (the run without a fault, then every crash cell), `crash@N`, `none` or a fault
 * of the world. Unset: every cell.
 */
export function selected(operation: string, fault: string, filter = process.env.QUEEN_CHAOS_CELLS): boolean {
  if (!filter?.trim()) return true;
  return filter.split(',').some((f) => {
    const [op, fl] = f.trim().split(':') as [string, string | undefined];
    if (op !== '*' && op.toLowerCase() !== operation.toLowerCase()) return false;
    if (!fl) return true;
    // Every step: the run without a fault first, whose activities are the steps this operation
    // takes here (the recorded history may be of another path: a growth with restarts, another leader).
    if (fl === 'crash') return fault === 'none' || fault.startsWith('crash@');
    return fl === fault;
  });
}

/** A small seeded generator (mulberry32): the same seed, the same choices. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface SoakResult {
  soak: true;
  seed: number;
  /** The length asked for: "60 min" or "8 operations" (absent in results written before it was asked). */
  length?: string;
  steps: { what: string; outcome: string; seconds: number | null; notes: string[] }[];
  pushes: number;
  pushesFailed: number;
  lost: number;
  violations: string[];
  seconds: number;
}

export const isSoak = (r: CellResult | SoakResult): r is SoakResult => 'soak' in r;

const pad = (s: string, n: number) => (s.length >= n ? s : s + ' '.repeat(n - s.length));

/** The table: one line per cell (fault × operation → outcome, time, pushes failed, lost). */
export function table(results: CellResult[]): string {
  const rows = results.map((r) => [
    r.operation,
    r.fault === 'none' ? 'no fault' : r.step ? `crash after ${r.step}` : r.fault,
    r.violations.length ? `FAILED: ${r.violations.join('; ')}` : r.outcome,
    r.seconds === null ? '—' : `${r.seconds} s`,
    r.pushesFailed === null ? '—' : `${r.pushesFailed}/${r.pushes}`,
    r.lost === null ? '—' : String(r.lost),
  ]);
  const head = ['operation', 'fault', 'outcome', 'time to finish', 'pushes failed', 'messages lost'];
  return markdown(head, rows);
}

/**
 * The summary for docs/reliability.md: per operation, the crash cells in one line (how many finished,
 * the range of times, failed pushes, lost messages), then each fault of the world.
 */
export function summary(results: CellResult[]): string {
  const rows: string[][] = [];
  const ops = [...new Set(results.map((r) => r.operation))];
  const range = (xs: number[]) => (xs.length === 0 ? '—' : Math.min(...xs) === Math.max(...xs) ? String(xs[0]) : `${Math.min(...xs)}–${Math.max(...xs)}`);
  for (const op of ops) {
    const mine = results.filter((r) => r.operation === op);
    const base = mine.filter((r) => r.fault === 'none');
    const crashes = mine.filter((r) => r.fault.startsWith('crash@'));
    for (const r of base) rows.push(line(op, 'no fault', [r]));
    if (crashes.length) rows.push(line(op, `a crash after each of its ${crashes.length} steps`, crashes));
    for (const r of mine.filter((x) => x.fault !== 'none' && !x.fault.startsWith('crash@'))) rows.push(line(op, r.fault, [r]));
  }
  function line(op: string, fault: string, rs: CellResult[]): string[] {
    const ok = rs.filter((r) => r.violations.length === 0 && r.outcome === 'finished');
    const outcome =
      rs.length === 1
        ? rs[0]!.violations.length
          ? `FAILED: ${rs[0]!.violations.join('; ')}`
          : rs[0]!.outcome
        : ok.length === rs.length
          ? `finished ${ok.length}/${rs.length}`
          : `finished ${ok.length}/${rs.length}; FAILED: ${rs.filter((r) => !ok.includes(r)).map((r) => `${r.step ?? r.fault}: ${r.violations.join('; ')}`).join(' / ')}`;
    const failed = rs.filter((r) => r.pushesFailed !== null);
    return [
      op,
      fault,
      outcome,
      range(rs.filter((r) => r.seconds !== null).map((r) => r.seconds!)) + (rs.some((r) => r.seconds !== null) ? ' s' : ''),
      failed.length ? range(failed.map((r) => r.pushesFailed!)) : '—',
      failed.length ? String(rs.reduce((n, r) => n + (r.lost ?? 0), 0)) : '—',
    ];
  }
  return markdown(['operation', 'fault', 'outcome', 'time to finish', 'pushes failed', 'messages lost'], rows);
}

export function markdown(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.min(60, Math.max(h.length, ...rows.map((r) => r[i]!.length))));
  const fmt = (r: string[]) => `| ${r.map((c, i) => pad(c, widths[i]!)).join(' | ')} |`;
  return [fmt(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(fmt)].join('\n');
}
