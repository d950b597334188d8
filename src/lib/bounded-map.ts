/**
 * Sets `key` as the newest entry of `map` (Maps iterate in insertion order) and drops the oldest
 * entries beyond `max`: a per-process cache that callers from outside cannot grow without bound.
 */
export function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) {
    const oldest = map.keys().next();
    if (oldest.done) break;
    map.delete(oldest.value);
  }
}
