// status.plan: while queenmq.com/plan or queenmq.com/plan-only asks for it, the observer writes the
// operation the spec would start and its steps (plan/preview.ts), from the observation
// it has just taken, and says what the operation waits for before it starts. It changes nothing.
import { readAnnotations } from '../crd/annotations.ts';
import { withDefaults } from '../crd/defaults.ts';
import type { PlanStatus, QueenCluster } from '../crd/schema.ts';
import { decide } from '../plan/decide.ts';
import type { Observation } from '../plan/observation.ts';
import { planOperation } from '../plan/preview.ts';
import { canonicalJson, imageRef } from './resources.ts';
import { clusterView } from './view.ts';

/** The same plan whatever the nulls and the time it was computed at. */
const comparable = (p: Record<string, unknown>) =>
  canonicalJson(JSON.parse(JSON.stringify({ ...p, computedAt: undefined }, (_k, v: unknown) => (v === null ? undefined : v))));

/**
 * status.plan as it should be now: the plan while an annotation asks for it, null (removed) when
 * none does and one is there, undefined when what is there is still right.
 */
export function planStatus(qc: QueenCluster, obs: Observation, now: Date): PlanStatus | null | undefined {
  const current = qc.status?.plan ?? null;
  if (!readAnnotations(qc.metadata.annotations).plan) return current ? null : undefined;
  const spec = withDefaults(qc.spec);
  const view = clusterView(qc, obs);
  const plan = planOperation({ view, obs, spec, image: imageRef(spec) });
  let message = plan.message;
  const running = qc.status?.operation?.type;
  if (running) {
    message = `${running} runs; what is left of it: ${message}`;
  } else if (plan.operation) {
    const d = decide(view, null, obs.at);
    if (d.action === 'start') message += '; it starts now';
    else if (d.action === 'paused') message += `; it waits: ${d.message}`;
    else if (d.action === 'stopped') message += `; it does not start by itself: ${d.message}`;
    else if (d.action === 'refused') message += `; ${d.message}`;
  }
  const next = { operation: plan.operation, target: plan.target, message, generation: qc.metadata.generation, steps: plan.steps };
  if (current && comparable(current) === comparable(next)) return undefined;
  return { ...next, computedAt: now.toISOString() };
}
