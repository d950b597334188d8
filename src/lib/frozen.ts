// Values that cannot change, and what is worked out from them kept with them.
//
// A read of an unchanged row is answered from the same frozen objects each time (db.ts,
// REUSE_ROWS): its row, the resource's view of it, the view's JSON text and its entity tag are
// each worked out once and then found again by the identity of what they were made from. A
// frozen object cannot change, so what was computed from it stays true for as long as it lives;
// a WeakMap keeps each result exactly that long.

/**
 * Freezes `value` and every object and array reachable from it, and returns it. Typed arrays
 * (a bytea's Buffer) are left as they are: their elements cannot be frozen. An object already
 * frozen is not walked again (what this function froze is frozen through). A Date's time can
 * still be set: nothing in the service sets the time of a Date it read.
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value) || ArrayBuffer.isView(value)) {
    return value;
  }
  Object.freeze(value);
  for (const member of Object.values(value)) deepFreeze(member);
  return value;
}

/**
 * `compute`, kept with its argument when the argument is frozen: called once per frozen object,
 * then answered from a WeakMap; an argument that may still change is computed each time. With
 * `freezeResult`, a result kept is deeply frozen, since every caller then shares it.
 */
export function memoOnFrozen<A, R>(compute: (arg: A) => R, freezeResult = false): (arg: A) => R {
  const kept = new WeakMap<object, R>();
  return (arg) => {
    if (typeof arg !== 'object' || arg === null || !Object.isFrozen(arg)) return compute(arg);
    const known = kept.get(arg);
    if (known !== undefined) return known;
    const result = freezeResult ? deepFreeze(compute(arg)) : compute(arg);
    kept.set(arg, result);
    return result;
  };
}
