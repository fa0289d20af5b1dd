// The Admin token the brokers ask for when they run with JWT_ENABLED=true (their
// /api/v1/system/* routes need the Admin role). It is read from the Secret key that
// spec.adminTokenSecret names, with `get` on that one Secret: the operator never lists or watches
// Secrets, so a Role with resourceNames on that Secret is all it needs. A token is kept for a short
// while and read again after the brokers refuse it (a rotated token is picked up).
import type { QueenCluster } from '../crd/schema.ts';
import { statusCode, type Kube } from './kube.ts';

export interface BrokerCredentials {
  /** The bearer token, or null when none is configured or it cannot be read. */
  token: string | null;
  /** Why the configured token cannot be used, in one line; null when all is well. */
  problem: string | null;
  /** Where it comes from, for messages: "Secret x, key y". */
  source: string | null;
}

const NONE: BrokerCredentials = { token: null, problem: null, source: null };
const TTL_MS = 30_000;
const cache = new Map<string, { at: number; creds: BrokerCredentials }>();

const keyOf = (qc: QueenCluster) => qc.metadata.uid ?? `${qc.metadata.namespace}/${qc.metadata.name}`;

/** The credentials of a cluster's brokers, from its spec.adminTokenSecret. */
export async function brokerCredentials(kube: Kube, qc: QueenCluster, now = Date.now()): Promise<BrokerCredentials> {
  const ref = qc.spec.adminTokenSecret;
  if (!ref) return NONE;
  const key = `${keyOf(qc)}|${ref.name}|${ref.key}`;
  const hit = cache.get(key);
  if (hit && now - hit.at < TTL_MS) return hit.creds;
  const source = `Secret ${ref.name}, key ${ref.key}`;
  let creds: BrokerCredentials;
  try {
    const secret = await kube.core.readNamespacedSecret({ namespace: qc.metadata.namespace, name: ref.name });
    const raw = secret.data?.[ref.key];
    const token = raw === undefined ? null : Buffer.from(raw, 'base64').toString('utf8').trim();
    if (token === null) creds = { token: null, source, problem: `the Secret ${ref.name} has no key ${ref.key} (spec.adminTokenSecret): add the brokers' Admin token there` };
    else if (token === '') creds = { token: null, source, problem: `the key ${ref.key} of the Secret ${ref.name} is empty (spec.adminTokenSecret): put the brokers' Admin token there` };
    else creds = { token, source, problem: null };
  } catch (err) {
    const code = statusCode(err);
    if (code === 404) creds = { token: null, source, problem: `the Secret ${ref.name} named in spec.adminTokenSecret does not exist: create it with the key ${ref.key}` };
    else if (code === 403)
      creds = {
        token: null,
        source,
        problem: `the operator may not read the Secret ${ref.name} (spec.adminTokenSecret): grant its ServiceAccount get on that one Secret, as the README shows`,
      };
    else throw err;
  }
  cache.set(key, { at: now, creds });
  return creds;
}

/** The brokers refused the token: read the Secret again next time. */
export function forgetCredentials(qc: QueenCluster): void {
  for (const k of cache.keys()) if (k.startsWith(`${keyOf(qc)}|`)) cache.delete(k);
}

/** In one line, why the brokers refuse the operator on their system routes. */
export function refusedWords(creds: BrokerCredentials, status: number, error: string): string {
  const answer = `${status}${error ? `: ${error}` : ''}`;
  if (creds.token) return `the brokers refuse the Admin token of ${creds.source} (${answer}): put a valid token with the Admin role there`;
  return `the brokers ask for an Admin token on their membership API (${answer}): set spec.adminTokenSecret to a Secret key that holds one`;
}
