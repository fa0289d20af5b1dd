// Safe to upgrade the operator: every recorded history of every operation type (saved from real
// runs in the test bed with QUEEN_RECORD_HISTORIES=1 npm run e2e -- ..., as the server's protobuf) replays against the
// current workflow code. A change that would make an operation in flight take another path fails
// here; such a change goes behind patched(). Histories of runs an earlier operator recorded stay
// beside the new ones (`<name>.before-parking.binpb`: before waits for a person parked in the
// workflow), so both the runs begun before an upgrade of the operator and those begun after it
// replay.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import { bundleWorkflows } from '../../worker.ts';

const dir = fileURLToPath(new URL('./histories/', import.meta.url));
const files = readdirSync(dir).filter((f) => f.endsWith('.binpb')).sort();
const load = (file: string) => temporal.api.history.v1.History.decode(readFileSync(`${dir}${file}`));
let code = '';

beforeAll(async () => {
  code = await bundleWorkflows();
}, 120_000);

describe('recorded histories replay against the current workflows', () => {
  it('there is a history of every workflow type', () => {
    const types = new Set(files.map((f) => load(f).events[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name));
    expect([...types].sort()).toEqual(['clusterObserver', 'formCluster', 'growVolumes', 'promoteStandby', 'replaceNode', 'restoreCluster', 'rollingUpgrade', 'scaleVoters', 'switchover', 'takeBackup']);
  });

  it.each(files)('%s', async (file) => {
    await Worker.runReplayHistory({ workflowBundle: { code }, replayName: file }, load(file));
  });
});
