// The backups a QueenCluster asks for, kept by the watcher: one Temporal Schedule per cluster with
// spec.backup.schedule (its id queenbackup-schedule/<ns>/<name>, visible under Schedules in the Web
// UI), paused while the cluster's pause annotation is set and deleted with the field or the
// cluster; and a backup on demand for each new value of the queenmq.com/backup annotation (the
// backup's workflow removes it). Each backup is a takeBackup workflow (workflows/backup.ts).
//
// The Schedule's overlap policy is Skip: a backup waits for a running operation of the cluster to
// end before it takes the volume, and the times of the schedule that fall while one backup waits
// or runs are skipped (counted as such in the Schedule), rather than queued behind it to take
// several backups of the same moment when the operation ends.
import { createHash } from 'node:crypto';
import { Client, ScheduleAlreadyRunning, ScheduleNotFoundError, ScheduleOverlapPolicy, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Logger } from 'pino';
import { readAnnotations } from '../crd/annotations.ts';
import { withDefaults } from '../crd/defaults.ts';
import { ANNOTATIONS, type QueenCluster } from '../crd/schema.ts';
import type { BackupInput } from '../workflows/backup.ts';
import { searchAttributesOf } from '../workflows/search-attributes.ts';

export const SCHEDULE_PREFIX = 'queenbackup-schedule/';
export const backupScheduleId = (ns: string, name: string) => `${SCHEDULE_PREFIX}${ns}/${name}`;
/** The workflows a cluster's Schedule starts are named <this>-<the time of the schedule>. */
export const scheduledBackupWorkflowId = (ns: string, name: string) => `queenbackup/${ns}/${name}`;
/** A backup on demand: one workflow per cluster object and annotation value. */
export function requestedBackupWorkflowId(ns: string, name: string, uid: string, value: string): string {
  return `queenbackup/${ns}/${name}/request-${createHash('sha256').update(`${uid}\0${value}`).digest('hex').slice(0, 12)}`;
}

/** How often Schedules of clusters that no longer exist are looked for (the operator may have been down when one was deleted). */
const SWEEP_MS = 5 * 60_000;

export interface BackupsOptions {
  temporal: Client;
  taskQueue: string;
  /** Whether the operator's search attributes are registered now (they may be added after the start). */
  searchAttributes: () => boolean;
}

export class Backups {
  private readonly opts: BackupsOptions;
  /** What each cluster's Schedule was last made to be (JSON), or null for none. */
  private readonly applied = new Map<string, string | null>();
  /** The last backup request started per cluster (uid and value). */
  private readonly requested = new Map<string, string>();
  private lastSweep = 0;

  constructor(opts: BackupsOptions) {
    this.opts = opts;
  }

  /** The cluster's Schedule as its spec and pause annotation want it, and a backup on demand if one is asked for. */
  async reconcile(qc: QueenCluster, log: Logger): Promise<void> {
    const { namespace, name, uid } = qc.metadata;
    const key = `${namespace}/${name}`;
    const backup = withDefaults(qc.spec).backup;
    const asked = readAnnotations(qc.metadata.annotations);
    const wanted = backup?.schedule ? { cron: backup.schedule, keep: backup.keep, paused: asked.pause, uid } : null;
    const wantedJson = JSON.stringify(wanted);
    const was = this.applied.get(key);
    if (was !== wantedJson) {
      // A cluster first seen without a schedule costs no call: one left from before is found by the sweep.
      if (wanted) await this.ensureSchedule(qc, wanted, log);
      else if (was !== undefined) await this.deleteSchedule(namespace, name, log);
      this.applied.set(key, wantedJson);
    }
    if (asked.backup && this.requested.get(key) !== `${uid}\0${asked.backup}`) {
      await this.startRequested(qc, asked.backup, log);
      this.requested.set(key, `${uid}\0${asked.backup}`);
    }
  }

  /** The cluster is gone: so is its Schedule (its backups stay, unless they were its own). */
  async removed(namespace: string, name: string, log: Logger): Promise<void> {
    const key = `${namespace}/${name}`;
    this.requested.delete(key);
    if (this.applied.get(key) === 'null') return;
    await this.deleteSchedule(namespace, name, log);
    this.applied.set(key, 'null');
  }

  /**
   * Deletes the Schedules no cluster wants: of clusters deleted, or whose spec.backup.schedule was
   * removed, while no operator ran. At the first resync and then at most every SWEEP_MS.
   */
  async sweep(cluster: (namespace: string, name: string) => QueenCluster | undefined, watched: (namespace: string) => boolean, log: Logger): Promise<void> {
    if (Date.now() - this.lastSweep < SWEEP_MS) return;
    this.lastSweep = Date.now();
    for await (const s of this.opts.temporal.schedule.list()) {
      if (!s.scheduleId.startsWith(SCHEDULE_PREFIX)) continue;
      const [namespace, name] = s.scheduleId.slice(SCHEDULE_PREFIX.length).split('/');
      if (!namespace || !name || !watched(namespace)) continue;
      const qc = cluster(namespace, name);
      if (qc && !qc.metadata.deletionTimestamp && withDefaults(qc.spec).backup?.schedule) continue;
      await this.deleteSchedule(namespace, name, log);
      this.applied.set(`${namespace}/${name}`, 'null');
    }
  }

  private async ensureSchedule(qc: QueenCluster, wanted: { cron: string; keep: number; paused: boolean; uid?: string }, log: Logger): Promise<void> {
    const { namespace, name, uid } = qc.metadata;
    const scheduleId = backupScheduleId(namespace, name);
    const input: BackupInput = { ref: { namespace, name, uid: uid! }, trigger: 'schedule' };
    const note = wanted.paused ? `paused by the ${ANNOTATIONS.pause} annotation of the QueenCluster ${namespace}/${name}` : `spec.backup of the QueenCluster ${namespace}/${name}`;
    const action = {
      type: 'startWorkflow' as const,
      workflowType: 'takeBackup',
      workflowId: scheduledBackupWorkflowId(namespace, name),
      taskQueue: this.opts.taskQueue,
      args: [input],
      staticSummary: `backup of ${namespace}/${name} (spec.backup.schedule "${wanted.cron}", keep ${wanted.keep})`,
      ...(this.opts.searchAttributes() ? { typedSearchAttributes: searchAttributesOf(namespace, name, 'Backup', 'schedule') } : {}),
    };
    const spec = { cronExpressions: [wanted.cron] };
    const policies = { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' };
    try {
      await this.opts.temporal.schedule.create({ scheduleId, spec, action, policies, state: { paused: wanted.paused, note } });
      log.info({ scheduleId, cron: wanted.cron, paused: wanted.paused }, 'created the backup Schedule');
      return;
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    }
    await this.opts.temporal.schedule.getHandle(scheduleId).update((prev) => ({ ...prev, spec, action, policies, state: { ...prev.state, paused: wanted.paused, note } }));
    log.info({ scheduleId, cron: wanted.cron, paused: wanted.paused }, 'updated the backup Schedule');
  }

  private async deleteSchedule(namespace: string, name: string, log: Logger): Promise<void> {
    try {
      await this.opts.temporal.schedule.getHandle(backupScheduleId(namespace, name)).delete();
      log.info({ scheduleId: backupScheduleId(namespace, name) }, 'deleted the backup Schedule');
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError) && !/not found/i.test(String(err))) throw err;
    }
  }

  private async startRequested(qc: QueenCluster, value: string, log: Logger): Promise<void> {
    const { namespace, name, uid } = qc.metadata;
    const input: BackupInput = { ref: { namespace, name, uid: uid! }, trigger: 'request', request: value };
    const workflowId = requestedBackupWorkflowId(namespace, name, uid!, value);
    try {
      await this.opts.temporal.workflow.start('takeBackup', {
        workflowId,
        taskQueue: this.opts.taskQueue,
        args: [input],
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        staticSummary: `backup of ${namespace}/${name}, asked for by ${ANNOTATIONS.backup}=${value}`,
        ...(this.opts.searchAttributes() ? { typedSearchAttributes: searchAttributesOf(namespace, name, 'Backup', 'request') } : {}),
      });
      log.info({ workflowId }, `started a backup: ${ANNOTATIONS.backup}=${value}`);
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }
}
