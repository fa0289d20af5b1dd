// The memory a burst took is given back once the resident memory grew by more than the margin,
// and not again until it grows again (memory.ts).
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { trimMemoryAfterBursts } from '../../memory.ts';

const MB = 2 ** 20;
const quiet = pino({ level: 'silent' });

describe('giving back the memory a burst took', () => {
  it('collects once the memory grew by more than the margin, then measures from what is left', () => {
    let rss = 200 * MB;
    let now = 0;
    const collections: unknown[] = [];
    const trim = trimMemoryAfterBursts(quiet, {
      everyMs: 3_600_000,
      growthBytes: 64 * MB,
      apartMs: 600_000,
      now: () => now,
      rss: () => rss,
      collect: (o) => {
        collections.push(o);
        rss = 260 * MB; // what a collection that reduces the footprint leaves
      },
    })!;
    try {
      // The first check only takes the mark: what starting took is not a burst.
      rss = 280 * MB;
      expect(trim.check().collected).toBe(false);
      rss = 250 * MB;
      expect(trim.check().collected).toBe(false);
      rss = 600 * MB; // formation of many clusters
      expect(trim.check()).toEqual({ collected: true, before: 600 * MB, after: 260 * MB });
      expect(collections).toEqual([{ type: 'major', execution: 'sync', flavor: 'last-resort' }]);
      // At rest, nothing more: the memory stays within the margin of what the collection left.
      rss = 300 * MB;
      expect(trim.check().collected).toBe(false);
      // Given back by itself: the next growth counts from there, but not within ten minutes of
      // the last collection.
      rss = 230 * MB;
      expect(trim.check().collected).toBe(false);
      rss = 300 * MB;
      now = 599_000;
      expect(trim.check().collected).toBe(false);
      now = 600_000;
      expect(trim.check().collected).toBe(true);
      expect(collections).toHaveLength(2);
    } finally {
      trim.stop();
    }
  });

  it('does nothing without an exposed collector', () => {
    expect(trimMemoryAfterBursts(quiet, { collect: null })).toBeNull();
  });
});
