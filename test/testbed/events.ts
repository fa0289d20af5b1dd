// Kubernetes Events written by the test bed's stand-ins, as the components they stand in for write
// them (core/v1 Events with a source component), with repeats within a minute folded away.
import type { KObject, Kube } from './kube.ts';

const time = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

export class EventRecorder {
  #kube: Kube;
  #component: string;
  #recent = new Map<string, number>();

  constructor(kube: Kube, component: string) {
    this.#kube = kube;
    this.#component = component;
  }

  record(obj: KObject, type: 'Normal' | 'Warning', reason: string, message: string, opts: { host?: string; fieldPath?: string } = {}): void {
    const key = `${obj.metadata.uid}|${reason}|${message}`;
    const now = Date.now();
    const last = this.#recent.get(key);
    if (last !== undefined && now - last < 60_000) return;
    this.#recent.set(key, now);
    if (this.#recent.size > 5000) {
      for (const [k, t] of this.#recent) if (now - t > 60_000) this.#recent.delete(k);
    }
    const ns = obj.metadata.namespace ?? 'default';
    const ts = time();
    void this.#kube
      .create(`/api/v1/namespaces/${ns}/events`, {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { generateName: `${obj.metadata.name}.`, namespace: ns },
        involvedObject: {
          apiVersion: obj.apiVersion ?? 'v1',
          kind: obj.kind ?? 'Pod',
          name: obj.metadata.name,
          namespace: ns,
          uid: obj.metadata.uid,
          fieldPath: opts.fieldPath,
        },
        type,
        reason,
        message,
        source: { component: this.#component, host: opts.host },
        reportingComponent: this.#component,
        reportingInstance: opts.host ?? this.#component,
        firstTimestamp: ts,
        lastTimestamp: ts,
        count: 1,
      })
      .catch(() => {});
  }
}
