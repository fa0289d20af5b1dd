// The operator's /healthz and /readyz (health.ts): alive unless its worker stopped or failed on its
// own or its watches have been broken longer than --unhealthy-after; ready only once the API server
// and Temporal answered, the worker polls and the watches synced, and no longer once it stops.
import { expect, it } from 'vitest';
import type { Worker } from '@temporalio/worker';
import type { ClusterCache } from '../../activities/cluster-cache.ts';
import { healthChecks, type Check, type Parts } from '../../health.ts';
import type { Options } from '../../options.ts';

const opts = { run: new Set(['watcher', 'worker']), unhealthyAfterMs: 60_000, temporal: { address: 'temporal:7233' } } as unknown as Options;
const worker = (state: string) => ({ getState: () => state }) as unknown as Worker;
const watches = (h: { synced: boolean; brokenFor: number; detail: string }) => ({ health: () => h }) as unknown as ClusterCache;
const up = (): Parts => ({ kubernetes: true, temporal: true, worker: worker('RUNNING'), watches: watches({ synced: true, brokenFor: 0, detail: '' }), stopping: false });
const failing = (checks: Check[]) => checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);

it('everything up: alive and ready', () => {
  const h = healthChecks(opts, up());
  expect(failing(h.live())).toEqual([]);
  expect(failing(h.ready())).toEqual([]);
});

it('a worker that failed, or stopped while the process does not stop, is not alive', () => {
  expect(failing(healthChecks(opts, { ...up(), worker: worker('FAILED') }).live())).toEqual(['worker: the worker is FAILED']);
  expect(failing(healthChecks(opts, { ...up(), worker: worker('STOPPED') }).live())).toEqual(['worker: the worker is STOPPED']);
  // Stopping on SIGTERM: alive (it drains), not ready.
  const stopping = healthChecks(opts, { ...up(), worker: worker('STOPPED'), stopping: true });
  expect(failing(stopping.live())).toEqual([]);
  expect(failing(stopping.ready())).toEqual(['stopping: the process is stopping', 'worker: the worker is STOPPED']);
});

it('a worker not started yet is alive (it connects) but not ready', () => {
  const h = healthChecks(opts, { ...up(), worker: null, temporal: false });
  expect(failing(h.live())).toEqual([]);
  expect(failing(h.ready())).toEqual(['temporal: the Temporal frontend temporal:7233 has not answered yet', 'worker: the worker has not started']);
});

it('watches: not ready before their first sync or while broken; not alive once broken longer than --unhealthy-after', () => {
  expect(failing(healthChecks(opts, { ...up(), watches: watches({ synced: false, brokenFor: 0, detail: 'listing' }) }).ready())).toEqual(['watches: listing']);
  const broken = (ms: number) => healthChecks(opts, { ...up(), watches: watches({ synced: true, brokenFor: ms, detail: 'the API server does not answer' }) });
  expect(failing(broken(10_000).ready())).toEqual(['watches: the API server does not answer']);
  expect(failing(broken(10_000).live())).toEqual([]);
  expect(failing(broken(61_000).live())).toEqual(['watches: broken for 61s: the API server does not answer']);
});

it('a process that runs only the watcher does not look at a worker, and the other way round', () => {
  const watcherOnly = { ...opts, run: new Set(['watcher']) } as unknown as Options;
  expect(failing(healthChecks(watcherOnly, { ...up(), worker: null }).ready())).toEqual([]);
  const workerOnly = { ...opts, run: new Set(['worker']) } as unknown as Options;
  expect(failing(healthChecks(workerOnly, { ...up(), watches: null }).ready())).toEqual([]);
});
