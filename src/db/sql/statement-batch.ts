import type { Queryable } from '../db.ts';

/**
 * Several statements in one round trip and one transaction (svc_batch, migration 0021): what a
 * transaction of a few short statements costs in round trips (BEGIN, one per statement,
 * COMMIT) is paid once. The statements run in their order, each seeing what the earlier ones
 * wrote, as in a READ COMMITTED transaction; an error in one rolls all of them back.
 *
 * Each statement must return rows (a SELECT, or a write with RETURNING), and only its first row
 * comes back; its text must be a constant of the code (each text is prepared once per
 * connection, named by its digest). Parameters travel as text, each cast by the database to the
 * type the statement's text gives it, as the driver's own parameters are.
 */
export interface Statement {
  sql: string;
  params: readonly unknown[];
}

const BATCH = 'SELECT item FROM svc_batch($1::jsonb) AS item';

/** The first row of each statement, by position (undefined: it returned no row). */
export async function runStatementBatch(
  db: Queryable,
  statements: readonly Statement[],
): Promise<(Record<string, unknown> | undefined)[]> {
  // Each distinct text is sent once per batch: a batch often repeats one statement per run.
  const texts: string[] = [];
  const textIndex = new Map<string, number>();
  const items = statements.map((s) => {
    let i = textIndex.get(s.sql);
    if (i === undefined) {
      i = texts.push(s.sql) - 1;
      textIndex.set(s.sql, i);
    }
    return [i, s.params.map(parameterText)];
  });
  const rows = await db.query<{ item: [number, Record<string, unknown>] }>(BATCH, [
    JSON.stringify({ texts, statements: items }),
  ]);
  const out: (Record<string, unknown> | undefined)[] = statements.map(() => undefined);
  for (const { item } of rows) out[item[0]] = item[1];
  return out;
}

/** A parameter in the text form the database reads for any type (arrays as array literals). */
export function parameterText(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return `{${v.map(arrayElementText).join(',')}}`;
  if (v instanceof Uint8Array) return `\\x${Buffer.from(v).toString('hex')}`;
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

function arrayElementText(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (Array.isArray(v)) return parameterText(v) as string;
  const text = parameterText(v) as string;
  return `"${text.replace(/[\\"]/g, '\\$&')}"`;
}
