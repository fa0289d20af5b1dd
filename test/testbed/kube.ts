// A small Kubernetes REST client for the test bed's own stand-ins (kubelet, storage, nodes, DNS).
// They need a handful of verbs and watches, and they must be cheap and predictable, so they use
// undici directly rather than the generated client; tests and the operator use
// @kubernetes/client-node through the kubeconfig the test bed writes.
import { Agent, request } from 'undici';

export interface KubeAuth {
  server: string;
  token: string;
  ca: string;
}

// The parts of Kubernetes objects the stand-ins read. Everything is optional on purpose: these are
// raw API objects.
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generateName?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  creationTimestamp?: string;
  ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }>;
}
export interface KObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  // Loosely typed: the stand-ins read spec and status fields by name.
  spec?: any;
  status?: any;
  data?: Record<string, string>;
  [k: string]: unknown;
}

export class KubeError extends Error {
  status: number;
  reason: string;
  body: any;
  constructor(method: string, path: string, status: number, body: any) {
    const message = body && typeof body === 'object' && typeof body.message === 'string' ? body.message : String(body);
    super(`${method} ${path}: ${status} ${message}`);
    this.status = status;
    this.reason = body && typeof body === 'object' ? String(body.reason ?? '') : '';
    this.body = body;
  }
  get apiMessage(): string {
    return this.body && typeof this.body === 'object' ? String(this.body.message ?? '') : '';
  }
}

export const isNotFound = (e: unknown) => e instanceof KubeError && e.status === 404;
export const isConflict = (e: unknown) => e instanceof KubeError && e.status === 409;

export interface RequestOptions {
  contentType?: string;
  query?: Record<string, string | number | boolean | undefined>;
  signal?: AbortSignal;
}

export class Kube {
  readonly server: string;
  readonly #token: string;
  readonly #agent: Agent;
  #closed = false;

  constructor(auth: KubeAuth) {
    this.server = auth.server.replace(/\/$/, '');
    this.#token = auth.token;
    this.#agent = new Agent({ connect: { ca: auth.ca }, keepAliveTimeout: 30_000, connections: 32, pipelining: 1 });
  }

  url(path: string, query?: RequestOptions['query']): string {
    const u = new URL(this.server + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u.toString();
  }

  async req<T = any>(method: string, path: string, body?: unknown, opts: RequestOptions = {}): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.#token}`, accept: 'application/json' };
    let payload: string | undefined;
    if (body !== undefined) {
      headers['content-type'] = opts.contentType ?? 'application/json';
      payload = JSON.stringify(body);
    }
    const res = await request(this.url(path, opts.query), {
      method: method as 'GET',
      headers,
      body: payload,
      dispatcher: this.#agent,
      signal: opts.signal,
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    const text = await res.body.text();
    let parsed: any = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // keep the text
    }
    if (res.statusCode >= 300) throw new KubeError(method, path, res.statusCode, parsed);
    return parsed as T;
  }

  get<T = KObject>(path: string, opts?: RequestOptions) {
    return this.req<T>('GET', path, undefined, opts);
  }
  async getOrNull<T = KObject>(path: string): Promise<T | null> {
    try {
      return await this.req<T>('GET', path);
    } catch (e) {
      if (isNotFound(e)) return null;
      throw e;
    }
  }
  create<T = KObject>(path: string, body: unknown) {
    return this.req<T>('POST', path, body);
  }
  /** JSON merge patch (RFC 7386). */
  mergePatch<T = KObject>(path: string, body: unknown) {
    return this.req<T>('PATCH', path, body, { contentType: 'application/merge-patch+json' });
  }
  /** JSON patch (RFC 6902), e.g. with a `test` op as a precondition. */
  jsonPatch<T = KObject>(path: string, ops: unknown[]) {
    return this.req<T>('PATCH', path, ops, { contentType: 'application/json-patch+json' });
  }
  apply<T = KObject>(path: string, body: unknown, fieldManager: string) {
    return this.req<T>('PATCH', path, body, {
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager, force: true },
    });
  }
  async delete(path: string, body?: unknown): Promise<void> {
    try {
      await this.req('DELETE', path, body);
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }

  /**
   * Opens a watch and calls onEvent for each event until the stream ends (server timeout) or the
   * signal aborts. Throws KubeError for an HTTP error; an ERROR event is passed to onEvent.
   */
  async watch(path: string, query: RequestOptions['query'], onEvent: (ev: WatchEvent) => void, signal: AbortSignal): Promise<void> {
    const res = await request(this.url(path, { ...query, watch: 1, allowWatchBookmarks: true }), {
      method: 'GET',
      headers: { authorization: `Bearer ${this.#token}`, accept: 'application/json' },
      dispatcher: this.#agent,
      signal,
      headersTimeout: 30_000,
      bodyTimeout: 0,
    });
    if (res.statusCode >= 300) {
      const text = await res.body.text();
      let parsed: any = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // keep the text
      }
      throw new KubeError('WATCH', path, res.statusCode, parsed);
    }
    let buf = '';
    for await (const chunk of res.body) {
      buf += chunk.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) onEvent(JSON.parse(line) as WatchEvent);
      }
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#agent.destroy().catch(() => {});
  }
}

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: any;
}

export const keyOf = (o: KObject) => (o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name);

export interface InformerHandlers<T extends KObject> {
  add?: (obj: T) => void;
  update?: (obj: T, old: T) => void;
  delete?: (obj: T) => void;
}

/**
 * List, then watch from the list's resourceVersion, keeping a cache; re-lists after a 410 Gone or
 * a broken watch it cannot resume. Handlers run synchronously in event order.
 */
export class Informer<T extends KObject> {
  readonly cache = new Map<string, T>();
  #kube: Kube;
  #path: string;
  #query: RequestOptions['query'];
  #handlers: InformerHandlers<T>[] = [];
  #abort = new AbortController();
  #synced: Promise<void>;
  #resolveSynced!: () => void;
  #log: (line: string) => void;
  #running = false;

  constructor(kube: Kube, path: string, opts: { query?: RequestOptions['query']; log?: (line: string) => void } = {}) {
    this.#kube = kube;
    this.#path = path;
    this.#query = opts.query;
    this.#log = opts.log ?? (() => {});
    this.#synced = new Promise((r) => (this.#resolveSynced = r));
  }

  on(h: InformerHandlers<T>): this {
    this.#handlers.push(h);
    return this;
  }

  get(key: string): T | undefined {
    return this.cache.get(key);
  }
  list(): T[] {
    return [...this.cache.values()];
  }

  start(): Promise<void> {
    if (!this.#running) {
      this.#running = true;
      void this.#run();
    }
    return this.#synced;
  }

  stop(): void {
    this.#abort.abort();
  }

  #emit(kind: 'add' | 'update' | 'delete', obj: T, old?: T) {
    for (const h of this.#handlers) {
      try {
        if (kind === 'add') h.add?.(obj);
        else if (kind === 'update') h.update?.(obj, old!);
        else h.delete?.(obj);
      } catch (e) {
        this.#log(`informer ${this.#path}: handler failed: ${(e as Error).stack ?? e}`);
      }
    }
  }

  async #relist(): Promise<string> {
    const list = await this.#kube.get<{ metadata: { resourceVersion: string }; items: T[]; kind?: string }>(this.#path, {
      query: this.#query,
      signal: this.#abort.signal,
    });
    const seen = new Set<string>();
    for (const item of list.items) {
      const key = keyOf(item);
      seen.add(key);
      const old = this.cache.get(key);
      this.cache.set(key, item);
      if (!old) this.#emit('add', item);
      else if (old.metadata.resourceVersion !== item.metadata.resourceVersion) this.#emit('update', item, old);
    }
    for (const [key, old] of [...this.cache]) {
      if (!seen.has(key)) {
        this.cache.delete(key);
        this.#emit('delete', old);
      }
    }
    return list.metadata.resourceVersion;
  }

  async #run(): Promise<void> {
    const signal = this.#abort.signal;
    let rv: string | undefined;
    let failures = 0;
    while (!signal.aborted) {
      try {
        if (rv === undefined) {
          rv = await this.#relist();
          this.#resolveSynced();
        }
        let gone = false;
        await this.#kube.watch(
          this.#path,
          { ...this.#query, resourceVersion: rv, timeoutSeconds: 240 + Math.floor(Math.random() * 120) },
          (ev) => {
            if (ev.type === 'ERROR') {
              if (ev.object?.code === 410) gone = true;
              else this.#log(`informer ${this.#path}: watch error ${JSON.stringify(ev.object)}`);
              return;
            }
            const obj = ev.object as T;
            rv = obj.metadata?.resourceVersion ?? rv;
            if (ev.type === 'BOOKMARK') return;
            const key = keyOf(obj);
            const old = this.cache.get(key);
            if (ev.type === 'DELETED') {
              this.cache.delete(key);
              this.#emit('delete', obj);
            } else {
              this.cache.set(key, obj);
              if (old) this.#emit('update', obj, old);
              else this.#emit('add', obj);
            }
          },
          signal,
        );
        if (gone) rv = undefined;
        failures = 0;
      } catch (e) {
        if (signal.aborted) return;
        if (e instanceof KubeError && e.status === 410) rv = undefined;
        failures++;
        if (failures > 2) rv = undefined;
        this.#log(`informer ${this.#path}: ${(e as Error).message}; retrying`);
        await new Promise((r) => setTimeout(r, Math.min(200 * 2 ** failures, 5000)));
      }
    }
  }
}

const binarySuffix: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const decimalSuffix: Record<string, number> = { n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, K: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };

/** Parses a Kubernetes resource quantity ("50Gi", "1", "500m", "1e3") into a number of units. */
export function parseQuantity(q: string | number | undefined): number {
  if (q === undefined) return 0;
  if (typeof q === 'number') return q;
  const m = /^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|K|M|G|T|P|E)?)$/.exec(q.trim());
  if (!m) throw new Error(`not a quantity: ${q}`);
  const base = Number(m[1]);
  if (m[2]) return base * 10 ** Number(m[2].slice(1));
  const suffix = m[3] ?? '';
  return base * (binarySuffix[suffix] ?? decimalSuffix[suffix]!);
}

/** Formats bytes the way the API server would canonicalise a binary quantity (e.g. 53687091200 → 50Gi). */
export function formatBytes(bytes: number): string {
  for (const [suffix, mult] of [['Ei', 2 ** 60], ['Pi', 2 ** 50], ['Ti', 2 ** 40], ['Gi', 2 ** 30], ['Mi', 2 ** 20], ['Ki', 2 ** 10]] as const) {
    if (bytes >= mult && bytes % mult === 0) return `${bytes / mult}${suffix}`;
  }
  return String(bytes);
}
