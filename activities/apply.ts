// Applying the objects a cluster has besides its StatefulSet: the Services, the disruption budget
// and the NetworkPolicy. Each is an object of its own that no other waits for, so they go to the
// API server side by side: under load a request takes a few hundred milliseconds, and one after
// the other they were most of the step that applies a new pod template.
import type { QueenCluster } from '../crd/schema.ts';
import type { ActivityDeps, ClusterRef } from './common.ts';
import { labelServing } from './drain.ts';
import { applyObject, deleteOwnedNetworkPolicy } from './kube.ts';
import { disruptionBudget, names, networkPolicy, services } from './resources.ts';

/**
 * Applies the Services, the disruption budget and the NetworkPolicy (or deletes the cluster's
 * policy when it is turned off). The pods made before the serving label get it before the client
 * Services, which select on it, are applied; the rest does not wait for that.
 */
export async function applyObjectsBesideStatefulSet(deps: ActivityDeps, ref: Pick<ClusterRef, 'namespace' | 'name'>, qc: QueenCluster): Promise<void> {
  const policy = networkPolicy(qc);
  await Promise.all([
    labelServing(deps, ref).then(() => Promise.all(services(qc).map((svc) => applyObject(deps.kube, svc)))),
    applyObject(deps.kube, disruptionBudget(qc)),
    policy ? applyObject(deps.kube, policy) : deleteOwnedNetworkPolicy(deps.kube, qc, names.networkPolicy(ref.name)),
  ]);
}
