// What the Temporal server says about a cluster's operations: the runs of its workflow id, and
// the steps (activities) of a run, read from the server's history (as the Web UI shows them).
import type { Scenario } from './harness.ts';

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
