// The image registry the simulated nodes pull the Queen images from, and what each node holds.
// A tag that contains "missing", or one named through the control API, is not in the registry:
// its pull fails with NotFound (ErrImagePull, then ImagePullBackOff). Any other image is pulled
// the first time a node needs it, in `pullSeconds` (scaled by the time factor, like every pod
// timing), and is present on that node afterwards. The operator's image is not pulled from here
// (the image store builds it).
export class Registry {
  /** Tags, or whole image references, the registry does not have. */
  readonly missing = new Set<string>();
  /** How long (seconds) a node takes to pull an image it does not hold. */
  pullSeconds = 3;
  /** The size the Pulled event reports. */
  imageBytes = 48_234_496;
  #present = new Map<string, Set<string>>();

  static tagOf(image: string): string | null {
    const name = image.split('@')[0]!;
    const colon = name.lastIndexOf(':');
    return colon > name.lastIndexOf('/') ? name.slice(colon + 1) : null;
  }

  isMissing(image: string): boolean {
    const tag = Registry.tagOf(image);
    return (tag ?? '').includes('missing') || this.missing.has(image) || (tag !== null && this.missing.has(tag));
  }

  has(node: string, image: string): boolean {
    return this.#present.get(node)?.has(image) ?? false;
  }

  add(node: string, image: string): void {
    let set = this.#present.get(node);
    if (!set) this.#present.set(node, (set = new Set()));
    set.add(image);
  }

  /** Forgets what the nodes hold (every image is pulled again). */
  forget(): void {
    this.#present.clear();
  }

  state(): { missing: string[]; pullSeconds: number; present: Record<string, string[]> } {
    return {
      missing: [...this.missing].sort(),
      pullSeconds: this.pullSeconds,
      present: Object.fromEntries([...this.#present].map(([n, s]) => [n, [...s].sort()])),
    };
  }
}
