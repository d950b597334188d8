/** A slug: lowercase ASCII letters and digits in groups joined by single hyphens. */
export const SLUG_PATTERN = '^[a-z0-9]+(?:-[a-z0-9]+)*$';
export const SLUG_MAX_LENGTH = 100;

/**
 * The slug of a name: accents dropped, lowercase, every run of other characters turned into
 * one hyphen, cut so that a `-NNN` suffix still fits. A name with no usable character gives
 * `fallback`.
 */
export function slugify(name: string, fallback: string): string {
  const base = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, SLUG_MAX_LENGTH - 10)
    .replace(/-+$/, '');
  return base || fallback;
}

/**
 * The first of `base`, `base-2`, `base-3`, ... that is not in `taken`. `taken` need only hold
 * the slugs that start with `base`.
 */
export function firstFreeSlug(base: string, taken: Iterable<string>): string {
  const used = new Set(taken);
  if (!used.has(base)) return base;
  for (let n = 2; ; n++) {
    const candidate = `${base}-${n}`;
    if (!used.has(candidate)) return candidate;
  }
}

/** PostgreSQL's unique_violation (SQLSTATE 23505), as both adapters report it. */
export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';
}

/**
 * Inserts a row under a slug unique in its organization. An explicit slug that is taken is a
 * conflict (`conflict(slug)` is thrown); a generated one takes the first free `-N` suffix, and
 * tries again if a concurrent insert took it first. `insert` must fail only with the unique
 * violation of the slug.
 */
export async function insertWithUniqueSlug<T>(options: {
  explicit: string | undefined;
  base: string;
  taken: (base: string) => Promise<string[]>;
  insert: (slug: string) => Promise<T>;
  conflict: (slug: string, cause: unknown) => Error;
}): Promise<T> {
  if (options.explicit !== undefined) {
    try {
      return await options.insert(options.explicit);
    } catch (err) {
      if (isUniqueViolation(err)) throw options.conflict(options.explicit, err);
      throw err;
    }
  }
  for (let attempt = 1; ; attempt++) {
    const slug = firstFreeSlug(options.base, await options.taken(options.base));
    try {
      return await options.insert(slug);
    } catch (err) {
      if (!isUniqueViolation(err) || attempt >= 5) throw err;
    }
  }
}
