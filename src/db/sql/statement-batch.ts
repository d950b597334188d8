import { hash } from 'node:crypto';
import type { Db, Queryable } from '../db.ts';

/**
 * Several statements in one round trip and one transaction (svc_batch, migration 0021): what a
 * transaction of a few short statements costs in round trips (BEGIN, one per statement,
 * COMMIT) is paid once. The statements run in their order, each seeing what the earlier ones
 * wrote, as in a READ COMMITTED transaction; an error in one rolls all of them back.
 *
 * Each statement must return rows (a SELECT, or a write with RETURNING), and only its first row
 * comes back; its text must be a constant of the code (each text is prepared once per
 * connection, named by its digest, and sent only until a batch carrying it has committed:
 * svc_statement_texts keeps it for the connections that have not prepared it yet).
 * Parameters travel as text, each cast by the database to the type the statement's text gives
 * it, as the driver's own parameters are.
 */
export interface Statement {
  sql: string;
  params: readonly unknown[];
}

const BATCH = 'SELECT item FROM svc_batch($1::jsonb) AS item';

/** Names by text: a text is hashed once per process. */
const statementNames = new Map<string, string>();
/** The name a text is prepared under (svc_batch: `svc_batch_` and the md5 of the text). */
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `svc_batch_${hash('md5', text)}`;
    statementNames.set(text, name);
  }
  return name;
}

/**
 * Texts a batch carried and committed, by database: they are in its svc_statement_texts
 * (migration 0023), so later batches to it send only their names. Only a batch sent outside a
 * caller's transaction commits by itself; one inside a transaction always carries its texts,
 * since that transaction may still roll back what it wrote.
 */
const textsKept = new WeakMap<Db, Set<string>>();

/** The error svc_batch raises for a name it has neither prepared nor kept (SQLSTATE SVC01). */
function isUnknownStatement(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'SVC01';
}

/** A Db commits each statement by itself; the Queryable of a transaction is not one. */
function commitsByItself(db: Queryable): db is Db {
  return 'backend' in db;
}

/** The first row of each statement, by position (undefined: it returned no row). */
export async function runStatementBatch(
  db: Queryable,
  statements: readonly Statement[],
): Promise<(Record<string, unknown> | undefined)[]> {
  // Each distinct text is named once per batch: a batch often repeats one statement per run.
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
  const names = texts.map(statementName);
  const send = (withTexts: boolean) =>
    db.query<{ item: [number, Record<string, unknown>] }>(BATCH, [
      JSON.stringify(withTexts ? { names, texts, statements: items } : { names, statements: items }),
    ]);
  let kept: Set<string> | undefined;
  if (commitsByItself(db)) {
    kept = textsKept.get(db) ?? new Set();
    textsKept.set(db, kept);
  }
  const namesOnly = kept !== undefined && texts.every((t) => kept.has(t));
  let rows: { item: [number, Record<string, unknown>] }[];
  try {
    rows = await send(!namesOnly);
  } catch (err) {
    // The kept texts were removed (by hand): nothing ran; the batch goes again with its texts.
    if (!namesOnly || !isUnknownStatement(err)) throw err;
    rows = await send(true);
  }
  if (kept) for (const t of texts) kept.add(t);
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
