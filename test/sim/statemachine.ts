// The applied state of one node: KV, queues, skipped entries, the membership in effect at the
// applied point. Apply is deterministic: every node computes the same results from the same log.

import { createHash } from 'node:crypto';
import type { Command, Entry, LinkCommand, LinkState, MembershipConfig, SkipRecord } from './types.ts';

export interface QueueMsg {
  messageId: string;
  transactionId: string;
  partition: string;
  payload: unknown;
  createdAt: number;
}

export interface QueueState {
  msgs: QueueMsg[];
  seen: Record<string, string>; // transactionId -> messageId
  committed: string[]; // transactionIds of applied pushes, in order
}

export interface SmState {
  applied: number;
  appliedTerm: number;
  appliedTs: number; // timestamp of the last applied entry (0 = nothing applied)
  kv: Record<string, { value: unknown; version: number; expiresAt: number | null }>;
  kvVersion: number;
  queues: Record<string, QueueState>;
  skipped: SkipRecord[];
  membership: { index: number; term: number; config: MembershipConfig } | null;
  clusterVersion: number;
  /** Bytes the applied entries count for beyond their JSON (entry padding): the store's size grows by it. */
  pad?: number;
  /** The cluster's part in a link (test/sim/LINK.md); absent on a cluster never part of one. */
  link?: LinkState;
}

export function emptyState(): SmState {
  return {
    applied: 0,
    appliedTerm: 0,
    appliedTs: 0,
    kv: {},
    kvVersion: 0,
    queues: {},
    skipped: [],
    membership: null,
    clusterVersion: 0,
    pad: 0,
  };
}

export class PoisonError extends Error {}

export function entryDigest(e: Entry): string {
  const body = JSON.stringify({ kind: e.kind, cmd: e.cmd ?? null, membership: e.membership ?? null, ...(e.version !== undefined ? { version: e.version } : {}) });
  return createHash('sha256').update(body).digest('hex').slice(0, 16);
}

function isPoison(v: unknown): boolean {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && (v as Record<string, unknown>).__queenSimPoison === true;
}

export type ApplyResult = unknown;

function queue(s: SmState, name: string): QueueState {
  let q = s.queues[name];
  if (!q) {
    q = { msgs: [], seen: {}, committed: [] };
    s.queues[name] = q;
  }
  return q;
}

function applyCommand(s: SmState, e: Entry, cmd: Command): ApplyResult {
  switch (cmd.t) {
    case 'kv': {
      if (isPoison(cmd.value)) throw new PoisonError('the KV value cannot be applied (simulated poisoned entry)');
      const k = `${cmd.ns}/${cmd.key}`;
      let cur: SmState["kv"][string] | undefined = s.kv[k];
      if (cur && cur.expiresAt !== null && cur.expiresAt <= e.ts) {
        delete s.kv[k];
        cur = undefined;
      }
      if (cmd.expect !== null) {
        let reason: string | null = null;
        if (cmd.expect === 0 && cur) reason = 'exists';
        else if (cmd.expect > 0 && !cur) reason = 'absent';
        else if (cmd.expect > 0 && cur && cur.version !== cmd.expect) reason = 'version';
        if (reason !== null) {
          return { index: 0, op: 'put', applied: false, key: cmd.key, reason, value: cur ? cur.value : null, version: cur ? cur.version : null };
        }
      }
      s.kvVersion += 1;
      s.kv[k] = { value: cmd.value, version: s.kvVersion, expiresAt: cmd.ttlSeconds !== null ? e.ts + cmd.ttlSeconds * 1000 : null };
      return { index: 0, op: 'put', applied: true, key: cmd.key, value: cmd.value, version: s.kvVersion };
    }
    case 'push': {
      if (cmd.items.some((it) => isPoison(it.payload))) throw new PoisonError('the pushed payload cannot be applied (simulated poisoned entry)');
      const results: unknown[] = [];
      cmd.items.forEach((it, i) => {
        const q = queue(s, it.queue);
        const prev = q.seen[it.transactionId];
        if (prev !== undefined) {
          results.push({ transactionId: it.transactionId, status: 'duplicate', messageId: prev });
          return;
        }
        const messageId = `${e.index.toString(16).padStart(8, '0')}-${i.toString(16).padStart(4, '0')}-${e.term}`;
        q.seen[it.transactionId] = messageId;
        q.committed.push(it.transactionId);
        q.msgs.push({ messageId, transactionId: it.transactionId, partition: it.partition, payload: it.payload, createdAt: e.ts });
        results.push({ transactionId: it.transactionId, status: 'queued', messageId });
      });
      return results;
    }
    case 'pop': {
      const q = s.queues[cmd.queue];
      if (!q) return [];
      const out: QueueMsg[] = [];
      const keep: QueueMsg[] = [];
      for (const m of q.msgs) {
        if (out.length < cmd.batch && (cmd.partition === null || m.partition === cmd.partition)) out.push(m);
        else keep.push(m);
      }
      q.msgs = keep;
      return out.map((m) => ({ ...m, queue: cmd.queue }));
    }
    case 'link':
      return applyLink(s, e, cmd);
  }
}

/**
 * The link's entries. A mirrored source entry is applied as the source applied it (its index, term
 * and timestamp: the same message ids, versions and expiries), and only when it follows the
 * standby's position: one that does not (a duplicate, one out of its turn, or one after the
 * promotion) changes nothing.
 */
function applyLink(s: SmState, e: Entry, cmd: LinkCommand): ApplyResult {
  switch (cmd.op) {
    case 'attach':
      if (s.link) return { refused: 'not_empty' };
      s.link = { role: 'standby', id: cmd.id, source: cmd.source, position: cmd.position, since: cmd.at };
      return { role: 'standby' };
    case 'mirror': {
      if (s.link?.role !== 'standby') return { refused: 'not_standby' };
      if (cmd.prev !== s.link.position.index) return { refused: 'link_out_of_sequence' };
      const result = applyCommand(s, { ...e, index: cmd.position.index, term: cmd.position.term, ts: cmd.position.ts }, cmd.cmd);
      s.link.position = cmd.position;
      return result;
    }
    case 'promote':
      if (s.link?.role !== 'standby') return { role: s.link?.role ?? 'primary' };
      s.link.role = 'promoted';
      s.link.promotedAt = cmd.at;
      return { role: 'promoted' };
  }
}

// Applies one entry. Throws PoisonError when the entry cannot be applied (the node then stops).
export function applyEntry(s: SmState, e: Entry): ApplyResult {
  let result: ApplyResult = null;
  if (e.kind === 'membership' && e.membership) {
    s.membership = { index: e.index, term: e.term, config: e.membership };
    if (s.clusterVersion === 0) s.clusterVersion = e.membership.clusterVersion;
  } else if (e.kind === 'version' && typeof e.version === 'number') {
    // The cluster version never goes down: apply writes what the leader proposed, only ever higher.
    s.clusterVersion = Math.max(s.clusterVersion, e.version);
  } else if (e.kind === 'cmd' && e.cmd) {
    result = applyCommand(s, e, e.cmd);
    if (e.pad) s.pad = (s.pad ?? 0) + e.pad;
  }
  s.applied = e.index;
  s.appliedTerm = e.term;
  s.appliedTs = e.ts;
  return result;
}

export function skipEntry(s: SmState, e: Entry, digest: string): void {
  s.skipped.push({ index: e.index, term: e.term, digest });
  s.applied = e.index;
  s.appliedTerm = e.term;
  s.appliedTs = e.ts;
}
