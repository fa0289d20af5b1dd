// Pod ordinals and node ids, as the QueenCluster API fixes them: pod <name>-<ordinal> runs node
// <ordinal + 1> (QUEEN_RAFT_NODE_ID=ordinal), and its claim is data-<name>-<ordinal>.

/** Node id of the pod with this ordinal: pod <name>-0 is node 1. */
export const nodeIdOf = (ordinal: number) => ordinal + 1;
export const ordinalOf = (nodeId: number) => nodeId - 1;

/** The ordinal of a pod or claim name of this cluster, or -1. */
export function parseOrdinal(clusterName: string, objectName: string, prefix = ''): number {
  const head = `${prefix}${clusterName}-`;
  if (!objectName.startsWith(head)) return -1;
  const rest = objectName.slice(head.length);
  return /^(0|[1-9][0-9]{0,5})$/.test(rest) ? Number(rest) : -1;
}
