// The steps of the link's operations, in the words their Events and status lines use, with the
// gates each waits on: what a plan (status.plan) shows for them, and what workflows/promote-standby.ts
// and workflows/switchover.ts run.
import type { PlannedStep } from './preview.ts';

export const PROMOTE_STEPS: PlannedStep[] = [
  { step: 'read where the standby stands in its source', gates: ['leader-known', 'source-stopped'] },
  { step: 'promote the standby', gates: [] },
  { step: 'wait for a write to commit', gates: ['write-commits'] },
];

export const SWITCHOVER_STEPS: PlannedStep[] = [
  { step: 'check that the standby follows its source', gates: ['standby-follows'] },
  { step: "take the source out of its clients' reach", gates: ['source-fenced'], note: 'the clients\' write downtime begins' },
  { step: "wait for the standby to read the source's last entry", gates: ['standby-caught-up'] },
  { step: 'stop the source', gates: ['pod-gone'] },
  { step: 'read where the standby stands in its source', gates: ['leader-known'] },
  { step: 'promote the standby', gates: [] },
  { step: 'wait for a write to commit', gates: ['write-commits'], note: "the clients' write downtime ends" },
  { step: 'make this cluster the source', gates: [] },
  { step: 'make the old source a standby of the new primary', gates: [], note: 'its volumes are emptied: it starts again from a seed of this cluster' },
];
