// What the backup and restore scenarios read: the QueenBackups of a namespace, their
// VolumeSnapshots, and the Temporal Schedule of a cluster.
import type { QueenBackup } from '../../crd/backup.ts';
import { BACKUP_LABELS, BACKUP_PLURAL } from '../../crd/backup.ts';
import { GROUP, VERSION } from '../../crd/schema.ts';
import { backupScheduleId } from '../../watcher/backups.ts';
import { waitFor, type Scenario } from './harness.ts';

export async function backups(s: Scenario, cluster = 'queen'): Promise<QueenBackup[]> {
  const list = (await s.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: s.ns, plural: BACKUP_PLURAL, labelSelector: `${BACKUP_LABELS.cluster}=${cluster}` })) as { items: QueenBackup[] };
  return list.items.sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
}

export async function backup(s: Scenario, name: string): Promise<QueenBackup | null> {
  return (await s.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: s.ns, plural: BACKUP_PLURAL, name }).catch(() => null)) as QueenBackup | null;
}

/** Waits for the backup a request of the queenmq.com/backup annotation made (trigger request), newer than `after`, to end. */
export async function requestedBackup(s: Scenario, after: Set<string>, ended: (b: QueenBackup) => boolean, timeoutMs: number, cluster = 'queen'): Promise<QueenBackup> {
  let seen: QueenBackup | undefined;
  return waitFor(
    'the backup asked for',
    async () => {
      seen = (await backups(s, cluster)).find((b) => !after.has(b.metadata.name) && b.metadata.labels?.[BACKUP_LABELS.trigger] === 'request');
      return seen && ended(seen) ? seen : undefined;
    },
    timeoutMs,
    () => JSON.stringify(seen?.status ?? null),
  );
}

export async function volumeSnapshot(s: Scenario, name: string): Promise<any | null> {
  return s.custom.getNamespacedCustomObject({ group: 'snapshot.storage.k8s.io', version: 'v1', namespace: s.ns, plural: 'volumesnapshots', name }).catch(() => null);
}

export async function schedule(s: Scenario, cluster = 'queen') {
  return s.temporal.schedule.getHandle(backupScheduleId(s.ns, cluster)).describe();
}

/** The Schedule is the scenario's to delete at its end (a namespace deleted under a stopped operator leaves it). */
export function deleteScheduleAtClose(s: Scenario, cluster = 'queen'): void {
  s.onClose(() => s.temporal.schedule.getHandle(backupScheduleId(s.ns, cluster)).delete().catch(() => undefined));
}

/** The entry index of a message, from the id the simulator gives it (`<index in hex>-<item>-<term>`). */
export const entryIndexOf = (messageId: string) => Number.parseInt(messageId.split('-')[0]!, 16);
