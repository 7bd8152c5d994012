/**
 * Changes of one device run one at a time, in the order asked, whatever else runs meanwhile: an
 * ensure and a removal of one TAP, or of one network's segment, never interleave.
 */
export class OneAtATime<K> {
  /** The change in flight on each key. */
  readonly #inFlight = new Map<K, Promise<unknown>>()

  /** Runs `change` once every change of `key` asked before it has settled. */
  async run<T> (key: K, change: () => Promise<T>): Promise<T> {
    const previous = this.#inFlight.get(key) ?? Promise.resolve()
    const next = previous.catch(() => {}).then(change)
    this.#inFlight.set(key, next)
    try {
      return await next
    } finally {
      if (this.#inFlight.get(key) === next) this.#inFlight.delete(key)
    }
  }
}
