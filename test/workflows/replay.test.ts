// Safe to upgrade the operator: every recorded history of every operation type (saved from real
// runs in the test bed with QUEEN_RECORD_HISTORIES=1 npm run e2e -- ...) replays against the
// current workflow code. A change that would make an operation in flight take another path fails
// here; such a change goes behind patched().
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import { bundleWorkflows } from '../../worker.ts';

const dir = fileURLToPath(new URL('./histories/', import.meta.url));
const files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
let code = '';

beforeAll(async () => {
  code = await bundleWorkflows();
}, 120_000);

describe('recorded histories replay against the current workflows', () => {
  it('there is a history of every workflow type', () => {
    const types = new Set(
      files.map((f) => {
        const h = JSON.parse(readFileSync(`${dir}${f}`, 'utf8')) as { events: { workflowExecutionStartedEventAttributes?: { workflowType?: { name?: string } } }[] };
        return h.events[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name;
      }),
    );
    expect([...types].sort()).toEqual(['clusterObserver', 'formCluster', 'rollingUpgrade']);
  });

  it.each(files)('%s', async (file) => {
    const history = JSON.parse(readFileSync(`${dir}${file}`, 'utf8'));
    await Worker.runReplayHistory({ workflowBundle: { code }, replayName: file }, history);
  });
});
