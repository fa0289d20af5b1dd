// Formatting of the words users read, so every message says the same thing the same way.

/** A duration as Go prints it: 30s, 1m0s, 1m30s, 1h2m3s; sub-second values as 500ms. */
export function goDuration(ms: number): string {
  if (ms <= 0) return '0s';
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const total = Math.floor(ms / 1000);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}

/** "node 4" for one id, "nodes 4 and 5" or "nodes 3, 4 and 5" for several. */
export function idsText(ids: readonly number[]): string {
  if (ids.length === 1) return `node ${ids[0]}`;
  return `nodes ${listText(ids.map(String))}`;
}

/** "pod 1", "pods 1 and 2". */
export function podsText(ordinals: readonly number[]): string {
  if (ordinals.length === 1) return `pod ${ordinals[0]}`;
  return `pods ${listText(ordinals.map(String))}`;
}

export function listText(items: readonly string[]): string {
  if (items.length <= 1) return items.join('');
  return `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

/** " (N entries behind)" when the lag is known, else nothing. */
export function lagText(lag: number | null | undefined): string {
  return typeof lag === 'number' ? ` (${lag} ${lag === 1 ? 'entry' : 'entries'} behind)` : '';
}

/** Bytes in the largest binary unit that divides them: 53687091200 → 50Gi. */
export function quantityText(bytes: number): string {
  const units = ['Ei', 'Pi', 'Ti', 'Gi', 'Mi', 'Ki'] as const;
  for (let i = 0; i < units.length; i++) {
    const size = 1024 ** (units.length - i);
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${units[i]}`;
  }
  return String(bytes);
}

/** Quantities are read with the API's one grammar (crd/quantity.ts). */
export { parseQuantity } from '../crd/quantity.ts';

/** The command a stopped operation's message ends with: a new retry token starts it again. */
export const resumeHint = (ref: { namespace: string; name: string }) =>
  `to resume: kubectl -n ${ref.namespace} annotate queencluster ${ref.name} queenmq.com/retry=$(date +%s) --overwrite`;
