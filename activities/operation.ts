// The beginning and the end of an operation in status: status.operation while it runs,
// status.lastOperation once it ended, and a phase that is not sticky: Ready, Degraded or Blocked
// as the cluster is when it ends.
import { activityInfo } from '@temporalio/activity';
import { readAnnotations } from '../crd/annotations.ts';
import { ANNOTATIONS, type LastOperationStatus, type Phase } from '../crd/schema.ts';
import { assess } from '../plan/assess.ts';
import type { OperationType } from '../plan/decide.ts';
import { stallMemoryFromStatus } from '../plan/stalls.ts';
import { loadCluster, observeCluster, opLogger, stepEvent, watchedCluster, withYieldPending, writePhase, type ActivityDeps, type ClusterRef } from './common.ts';
import { patchClusterAnnotations } from './kube.ts';
import { operationDuration, operationsEnded, operationsStarted } from '../metrics.ts';
import { observedStatus } from './status.ts';
import { clusterView } from './view.ts';
import { linkStatusOf, standbyProbeStatus } from '../plan/link.ts';
import { decide, rolledOutGeneration } from '../plan/decide.ts';

export interface OperationStart {
  type: OperationType;
  phase: Phase;
  message: string;
  target: string;
  fingerprint: string;
  retryToken: string;
}

export interface OperationEnd {
  type: OperationType;
  result: LastOperationStatus['result'];
  message: string;
  target: string;
  fingerprint: string;
  retryToken: string;
  startedAt: string;
}

function execution() {
  const info = activityInfo();
  return { workflowId: info.workflowExecution?.workflowId ?? '', runId: info.workflowExecution?.runId ?? '' };
}

export function operationActivities(deps: ActivityDeps) {
  return {
    /** Writes status.operation and the operation's first phase and message. Returns when it started. */
    async beginOperation(ref: ClusterRef, start: OperationStart): Promise<string> {
      // A first attempt finds nothing of its run in status: the object as the process's watches
      // have it (the watcher started the run on what they showed) serves, with no read from the
      // API server before the first status line. A later attempt reads what an earlier one wrote.
      const qc = (activityInfo().attempt === 1 ? watchedCluster(deps, ref)?.cluster : undefined) ?? (await loadCluster(deps, ref));
      const run = execution();
      // An attempt after one that did this and then lost its worker (a crash before Temporal heard
      // of it): the operation began then, and the Event says so once.
      const recorded = qc.status?.operation;
      const again = !!recorded?.runId && recorded.runId === run.runId && recorded.workflowId === run.workflowId;
      const startedAt = again && recorded.startedAt ? recorded.startedAt : new Date().toISOString();
      await writePhase(deps, ref, start.phase, start.message, {
        operation: { type: start.type, ...run, target: start.target, step: start.message, gate: null, startedAt, yieldTo: null },
      }, qc);
      if (!again) {
        opLogger(deps, ref).info({ type: start.type, target: start.target }, `${start.type} started`);
        operationsStarted.inc({ type: start.type });
      }
      // Also on an attempt after one that wrote status and then lost its worker or timed out before
      // its Event: recorded once whatever the attempts (the Event carries its step).
      await stepEvent(deps, qc, `${start.type}Started`, `${start.type} started: ${start.target}`);
      return startedAt;
    },

    /**
     * A yield asked for while a step that must finish runs (a pod's restart, the end of a
     * replacement): status says what it does now and that it yields after, so the more urgent
     * operation's wait is not a silent one.
     */
    async sayYieldPending(ref: ClusterRef, ask: { yieldTo: string }): Promise<void> {
      const qc = await loadCluster(deps, ref);
      const op = qc.status?.operation;
      if (!op) return;
      const message = withYieldPending(qc.status?.message || op.step || op.type, ask.yieldTo);
      opLogger(deps, ref).info({ yieldTo: ask.yieldTo }, message);
      // Kept in status.operation: the step's later lines say it too (writePhase).
      await writePhase(deps, ref, qc.status?.phase ?? 'Ready', message, { operation: { step: message, gate: op.gate ?? null, yieldTo: ask.yieldTo } }, qc);
    },

    /**
     * Clears status.operation, writes status.lastOperation, and sets the phase from a fresh look
     * at the cluster. A cancelled or failed operation whose request still stands shows Blocked
     * with its message, so nobody mistakes a half-done upgrade for a finished one.
     */
    async endOperation(ref: ClusterRef, end: OperationEnd): Promise<void> {
      const qc = await loadCluster(deps, ref);
      const log = opLogger(deps, ref);
      const run = execution();
      // An attempt after one that did this and then lost its worker: the end is recorded (and
      // told in an Event) once, at the time it happened; the phase is looked at again.
      const recorded = qc.status?.lastOperation;
      const again = !qc.status?.operation && recorded?.runId === run.runId && recorded?.workflowId === run.workflowId && recorded?.result === end.result;
      const lastOperation: LastOperationStatus = {
        type: end.type,
        ...run,
        result: end.result,
        message: end.message,
        target: end.target,
        fingerprint: end.fingerprint,
        retryToken: end.retryToken,
        startedAt: end.startedAt,
        finishedAt: (again && recorded?.finishedAt) || new Date().toISOString(),
      };
      let phase: Phase = 'Ready';
      let message = '';
      let observed: Record<string, unknown> = {};
      try {
        const obs = await observeCluster(deps, qc);
        const afterwards = { ...qc, status: { ...qc.status, lastOperation, operation: null } };
        const view = clusterView(afterwards, obs);
        // The spec is rolled out: observedGeneration catches up (not before).
        const rolledOut = rolledOutGeneration(view);
        if (rolledOut !== undefined) observed.observedGeneration = rolledOut;
        const decision = decide(view, null, Date.now());
        const a = assess({
          obs,
          memory: stallMemoryFromStatus(qc.status?.members, obs.at),
          formed: (qc.status?.voters?.length ?? 0) > 0 || (end.type === 'FormCluster' && end.result === 'Succeeded'),
          probe: null,
          stallAfterMs: deps.settings.stallAfterMs,
          secretName: qc.spec.secretName,
          stoppedOperation: decision.action === 'stopped' || decision.action === 'refused' ? decision.message : null,
          standby: qc.spec.standby,
        });
        phase = a.phase;
        message = a.message;
        observed = {
          ...observed,
          ...observedStatus(obs, stallMemoryFromStatus(qc.status?.members, obs.at)),
          ...(linkStatusOf(obs, qc.spec, qc.status) ?? {}),
          ...(standbyProbeStatus(obs, qc.spec, ref.namespace, new Date(obs.at)) ?? {}),
        };
      } catch (err) {
        log.warn({ err: String(err) }, 'could not look at the cluster after the operation; the observer will');
      }
      // A cancel is spent once the operation ended; an approval once the upgrade it let through is
      // over (done, or rolled back): the next upgrade, even to the same version, asks again. Spent
      // before status says the operation ended, so that whoever reads the end finds them gone (e2e
      // waits-restart-approval read Ready and Succeeded with the approval still there).
      const annotations = readAnnotations(qc.metadata.annotations);
      const spent: Record<string, null> = {
        ...(annotations.cancel ? { [ANNOTATIONS.cancel]: null } : {}),
        ...(annotations.approve && end.type === 'RollingUpgrade' && (end.result === 'Succeeded' || end.result === 'RolledBack') ? { [ANNOTATIONS.approve]: null } : {}),
      };
      if (Object.keys(spent).length > 0) await patchClusterAnnotations(deps.kube, ref.namespace, ref.name, spent);
      await writePhase(deps, ref, phase, message, { ...observed, operation: null, lastOperation });
      if (!again) {
        log.info({ type: end.type, result: end.result }, end.message);
        operationsEnded.inc({ type: end.type, result: end.result });
        const began = Date.parse(end.startedAt);
        if (Number.isFinite(began)) operationDuration.observe({ type: end.type, result: end.result }, Math.max(0, Date.now() - began) / 1000);
      }
      await stepEvent(deps, qc, `${end.type}${end.result}`, end.message, end.result === 'Succeeded' || end.result === 'Yielded' ? 'Normal' : 'Warning');
    },
  };
}
