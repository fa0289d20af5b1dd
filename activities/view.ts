// The view of a cluster that decides which operation it needs, from an observation.
import type { QueenCluster } from '../crd/schema.ts';
import type { ClusterView } from '../plan/decide.ts';
import type { Observation } from '../plan/observation.ts';
import { specHash, wantedTemplateHash } from './resources.ts';

export function clusterView(qc: QueenCluster, obs: Pick<Observation, 'statefulSet' | 'servicesPresent' | 'pods' | 'claims'>): ClusterView {
  return {
    qc,
    wantedSpecHash: specHash(qc),
    wantedTemplateHash: wantedTemplateHash(qc),
    statefulSet: obs.statefulSet,
    servicesPresent: obs.servicesPresent,
    pods: obs.pods,
    claims: obs.claims,
  };
}
