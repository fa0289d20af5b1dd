// What the Temporal server says about a cluster's operations: the runs of its workflow id, and
// the steps (activities) of a run, read from the server's history (as the Web UI shows them).
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { testbed, type Scenario } from './harness.ts';

export interface Run {
  workflowId: string;
  runId: string;
  type: string;
  status: string;
  startTime: Date;
}

/** Every run of a workflow id, oldest first. */
export async function workflowRuns(s: Scenario, workflowId: string): Promise<Run[]> {
  const runs: Run[] = [];
  for await (const w of s.temporal.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    runs.push({ workflowId: w.workflowId, runId: w.runId, type: w.type, status: w.status.name, startTime: w.startTime });
  }
  return runs.sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
}

/** The history events of a run. */
export async function historyEvents(s: Scenario, run: Pick<Run, 'workflowId' | 'runId'>) {
  const history = await s.temporal.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
  return history.events ?? [];
}

/** The activity types a run scheduled, in order. */
export async function activityTypes(s: Scenario, run: Pick<Run, 'workflowId' | 'runId'>): Promise<string[]> {
  return (await historyEvents(s, run))
    .map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name)
    .filter((n): n is string => !!n);
}

/**
 * With QUEEN_RECORD_HISTORIES=1, saves a run's history to test/workflows/histories/<name>.json:
 * the replay test runs every saved history against the current workflow code, so a change that
 * would break operations in flight is caught before an operator upgrade.
 */
export async function recordHistory(s: Scenario, run: Pick<Run, 'workflowId' | 'runId'>, name: string): Promise<void> {
  if (process.env.QUEEN_RECORD_HISTORIES !== '1') return;
  // The frontend's HTTP API answers the history in the JSON form replay reads.
  const events: unknown[] = [];
  let page = '';
  do {
    const url = `${testbed().temporal.uiUrl}/api/v1/namespaces/default/workflows/${encodeURIComponent(run.workflowId)}/history?execution.runId=${run.runId}${page ? `&nextPageToken=${encodeURIComponent(page)}` : ''}`;
    const res = await fetch(url);
    if (!res.ok) throw new Error(`the history of ${run.workflowId}: ${res.status} ${await res.text()}`);
    const body = (await res.json()) as { history?: { events?: unknown[] }; nextPageToken?: string };
    events.push(...(body.history?.events ?? []));
    page = body.nextPageToken ?? '';
  } while (page);
  const dir = fileURLToPath(new URL('../workflows/histories/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${dir}${name}.json`, `${JSON.stringify({ events }, null, 1)}\n`);
}
