// Work of a stand-in chained per key (a claim, a volume, a snapshot content): one sync of a key at
// a time, in the order asked, each key's chain independent of the others'.
export class Chains {
  readonly #chains = new Map<string, Promise<void>>();
  readonly #log: (line: string) => void;
  readonly #settled: () => void;

  /** `what` names the stand-in in a failure's log line; `settled` runs after each piece of work. */
  constructor(what: string, log: (line: string) => void, settled: () => void = () => undefined) {
    this.#log = (line) => log(`${what} ${line}`);
    this.#settled = settled;
  }

  enqueue(key: string, fn: () => Promise<void>): void {
    const prev = this.#chains.get(key) ?? Promise.resolve();
    const next = prev
      .then(fn)
      .catch((e) => this.#log(`${key}: ${(e as Error).message}`))
      .finally(() => {
        if (this.#chains.get(key) === next) this.#chains.delete(key);
        this.#settled();
      });
    this.#chains.set(key, next);
  }

  has(key: string): boolean {
    return this.#chains.has(key);
  }

  /** Until no work is queued. */
  async idle(): Promise<void> {
    while (this.#chains.size) await Promise.all([...this.#chains.values()]);
  }
}
