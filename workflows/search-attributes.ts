// The custom search attributes of the operator's workflows, so the Temporal Web UI and CLI find a
// cluster's operations without knowing a workflow id: `QueenNamespace = "prod" AND QueenOperation
// = "RollingUpgrade"` (all upgrades of namespace prod), `QueenCluster = "queen"` (everything of
// cluster queen, its observer included). Set when the watcher starts a workflow; the operator
// registers them at start where it may (connect.ts), and docs/temporal.md says how otherwise.
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';

export const SEARCH_ATTRIBUTES = {
  namespace: defineSearchAttributeKey('QueenNamespace', SearchAttributeType.KEYWORD),
  cluster: defineSearchAttributeKey('QueenCluster', SearchAttributeType.KEYWORD),
  operation: defineSearchAttributeKey('QueenOperation', SearchAttributeType.KEYWORD),
  target: defineSearchAttributeKey('QueenTarget', SearchAttributeType.KEYWORD),
} as const;

/** The attributes of one workflow of a cluster: its namespace and name, what it is, what it aims at. */
export function searchAttributesOf(namespace: string, name: string, operation: string, target: string): SearchAttributePair[] {
  return [
    { key: SEARCH_ATTRIBUTES.namespace, value: namespace },
    { key: SEARCH_ATTRIBUTES.cluster, value: name },
    { key: SEARCH_ATTRIBUTES.operation, value: operation },
    { key: SEARCH_ATTRIBUTES.target, value: target },
  ];
}
