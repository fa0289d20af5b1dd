// Memory given back to the system after a burst of work. V8 keeps the pages a burst took (forming
// or upgrading many clusters at once) until a collection that reduces the heap's footprint, which
// it starts by itself only when the process is idle, and an operator that looks at hundreds of
// clusters every few seconds never is. Measured on 200 resting clusters: 608 MB resident before
// one such collection, 347 MB after, and it stayed there at rest.
//
// So the process checks its resident memory once a minute and, when it has grown by more than a
// margin since the last such collection (or since its first check, after starting), runs one: the
// whole heap in several passes, its time in the log line, at most once in ten minutes (busy
// minutes grow the memory again at once, and would pay for one a minute), nothing at a steady
// rest. It needs the collector exposed (`--expose-gc`, as the image's entrypoint gives it);
// without it, it does nothing.
import type { Logger } from 'pino';

type Collect = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

export interface MemoryTrimOptions {
  /** How often the resident memory is read. */
  everyMs?: number;
  /** Growth of the resident memory since the last collection that starts the next one. */
  growthBytes?: number;
  /** The least time between two collections. */
  apartMs?: number;
  /** The time now (Date.now). */
  now?: () => number;
  /** The resident memory now (process.memoryUsage.rss). */
  rss?: () => number;
  /** The collector (globalThis.gc with --expose-gc). */
  collect?: Collect | null;
}

export interface MemoryTrim {
  /** One check: collects when the memory grew by more than the margin; returns what it did. */
  check(): { collected: boolean; before: number; after: number };
  stop(): void;
}

export function trimMemoryAfterBursts(log: Logger, opts: MemoryTrimOptions = {}): MemoryTrim | null {
  const collect = opts.collect === undefined ? ((globalThis as { gc?: Collect }).gc ?? null) : opts.collect;
  if (!collect) {
    log.debug('the garbage collector is not exposed (--expose-gc): memory a burst took is given back only when V8 sees the process idle');
    return null;
  }
  const rss = opts.rss ?? (() => process.memoryUsage.rss());
  const now = opts.now ?? Date.now;
  const growth = opts.growthBytes ?? 64 * 1024 * 1024;
  const apart = opts.apartMs ?? 600_000;
  // Measured from the first check, once the process has started what it runs.
  let base: number | null = null;
  let last = -Infinity;
  const check = () => {
    const before = rss();
    if (base === null || before - base <= growth || now() - last < apart) {
      // Memory given back by itself lowers the mark the next growth is measured from.
      base = Math.min(base ?? before, before);
      return { collected: false, before, after: before };
    }
    const began = performance.now();
    collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    const after = rss();
    base = after;
    last = now();
    log.info({ beforeMb: Math.round(before / 2 ** 20), afterMb: Math.round(after / 2 ** 20), ms: Math.round(performance.now() - began) }, 'gave back the memory a burst of work took');
    return { collected: true, before, after };
  };
  const timer = setInterval(check, opts.everyMs ?? 60_000);
  timer.unref();
  return { check, stop: () => clearInterval(timer) };
}
