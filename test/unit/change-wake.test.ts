// When a wait looks again after a change of its cluster's objects (activities/waits.ts ChangeWake):
// a burst of changes is seen by one look, no sooner than the gap after the last one began, but an
// object that is gone (a pod stopped, a claim deleted) wakes the look at once.
import { describe, expect, it } from 'vitest';
import { ChangeWake } from '../../activities/waits.ts';
import type { Change } from '../../activities/cluster-cache.ts';
import type { ActivityDeps } from '../../activities/common.ts';

const ref = { namespace: 'ns', name: 'queen', uid: 'u' } as never;

/** The process's watches, as far as a wait hears them: listeners told of each change. */
function watches() {
  const listeners: Array<(namespace: string, name: string, what: Change) => void> = [];
  return {
    deps: { cache: { onChange: (l: (namespace: string, name: string, what: Change) => void) => (listeners.push(l), () => undefined) } } as unknown as ActivityDeps,
    tell: (what: Change, name = 'queen') => {
      for (const l of listeners) l('ns', name, what);
    },
  };
}

const sleepFor = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Starts a look's wait (a gap of `gapMs`, a poll of `pollMs`); `before` runs once the look began
 * (a change it does not see). Resolves with the ms it waited.
 */
function waitFor(wake: ChangeWake, gapMs: number, pollMs = 30_000, before: () => void = () => undefined): Promise<number> {
  const began = performance.now();
  wake.looking();
  before();
  return wake.next(sleepFor, pollMs, began + gapMs).then(() => performance.now() - began);
}

describe('a wait woken by its cluster', () => {
  it('waits out the gap after a change of an object, so a burst is one look', async () => {
    const w = watches();
    const wake = new ChangeWake(w.deps, ref);
    const waited = waitFor(wake, 600);
    setTimeout(() => w.tell('owned'), 20);
    setTimeout(() => w.tell('owned'), 40);
    expect(await waited).toBeGreaterThanOrEqual(595);
    wake.close();
  });

  it('looks at once when an object is gone, even in the gap after another change', async () => {
    const w = watches();
    const wake = new ChangeWake(w.deps, ref);
    const waited = waitFor(wake, 5000);
    setTimeout(() => w.tell('owned'), 20);
    setTimeout(() => w.tell('gone'), 60);
    expect(await waited).toBeLessThan(4000);
    wake.close();
  });

  it('is not woken by its own status, nor by another cluster', async () => {
    const w = watches();
    const wake = new ChangeWake(w.deps, ref);
    const waited = waitFor(wake, 0, 500);
    setTimeout(() => w.tell('status'), 20);
    setTimeout(() => w.tell('gone', 'other'), 40);
    expect(await waited).toBeGreaterThanOrEqual(495);
    wake.close();
  });
});

describe('a wait that polls quickly', () => {
  it('looks again at its poll even when a change came before the gap is over', async () => {
    const w = watches();
    const wake = new ChangeWake(w.deps, ref);
    const waited = await waitFor(wake, 5000, 100, () => w.tell('owned'));
    expect(waited).toBeLessThan(4000);
    wake.close();
  });
});
