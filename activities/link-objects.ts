// What the cluster link adds to a cluster's objects (test/sim/LINK.md section 1): the QUEEN_LINK_*
// env of its pods, the label that lets a standby's pods through a source's NetworkPolicy to its
// raft port, and that rule. Pure functions of the cluster, as in resources.ts.
import type { V1EnvVar } from '@kubernetes/client-node';
import type { QueenCluster, StoredSpec } from '../crd/schema.ts';

/** On a standby's pods: a source's NetworkPolicy lets them in on its raft port (the link token authenticates them). */
export const LINK_LABEL = 'queenmq.com/link';

/** The most pods a QueenCluster has (spec.replicas is at most 5): a standby names every one a source may run. */
const MOST_PODS = 5;

/**
 * QUEEN_LINK_SOURCE: the addresses given, or every pod a QueenCluster source may have, at its
 * headless name on the raft port (this cluster's raftPort and domain: a source in the same
 * Kubernetes cluster with another raftPort is named by its addresses). Naming every ordinal keeps
 * the pods' template the same when the source changes its voters; the pods that do not exist are
 * tried only when the ones that do fail.
 */
export function linkSourceAddresses(qc: Pick<QueenCluster, 'metadata'>, spec: StoredSpec): string[] {
  const src = spec.standby?.source;
  if (!src) return [];
  if (src.addresses) return [...src.addresses];
  const name = src.cluster!.name;
  const ns = src.cluster!.namespace ?? qc.metadata.namespace;
  return Array.from({ length: MOST_PODS }, (_, i) => `${name}-${i}.${name}-headless.${ns}.svc.${spec.clusterDomain}:${spec.raftPort}`);
}

const secretEnv = (name: string, ref: { name: string; key: string }): V1EnvVar => ({ name, valueFrom: { secretKeyRef: { name: ref.name, key: ref.key } } });

/**
 * The link's env. A source: QUEEN_LINK_TOKEN. A standby: its source, the token it presents, how it
 * starts (QUEEN_LINK_SEED=1: node 1 takes the source's snapshot; or QUEEN_LINK_STANDBY: every node
 * starts empty), its name on the source, and the token it serves once promoted (so that after a
 * switchover its old source can follow it without a restart).
 */
export function linkEnv(qc: Pick<QueenCluster, 'metadata'>, spec: StoredSpec): V1EnvVar[] {
  const env: V1EnvVar[] = [];
  const serve = spec.link?.tokenSecret ?? spec.standby?.tokenSecret;
  if (serve) env.push(secretEnv('QUEEN_LINK_TOKEN', serve));
  const standby = spec.standby;
  if (!standby) return env;
  env.push(
    { name: 'QUEEN_LINK_SOURCE', value: linkSourceAddresses(qc, spec).join(',') },
    secretEnv('QUEEN_LINK_SOURCE_TOKEN', standby.tokenSecret),
    standby.seed === false ? { name: 'QUEEN_LINK_STANDBY', value: 'true' } : { name: 'QUEEN_LINK_SEED', value: '1' },
    { name: 'QUEEN_LINK_NAME', value: `${qc.metadata.namespace}.${qc.metadata.name}` },
  );
  return env;
}

/** The pod labels the link adds: a standby's pods may reach a source's raft port. */
export function linkPodLabels(spec: StoredSpec): Record<string, string> {
  return spec.standby ? { [LINK_LABEL]: 'true' } : {};
}
