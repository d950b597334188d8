import { hash } from 'node:crypto';
import type { Db, Queryable, Statement } from './db.ts';

/**
 * Db.batch on the embedded database: one call of svc_batch (migration 0021), a function that
 * runs the statements in their order in one statement that commits by itself, each prepared
 * once per connection under a name of its own with svc_batch's settings (one generic plan, no
 * sequential scans), and returns the first row of each as [position, row as JSON].
 *
 * Each statement's text is sent only until a batch carrying it has committed: svc_statement_texts
 * (migration 0023) keeps it for the connections that have not prepared it yet, and later batches
 * send only its name. Parameters travel as text, each cast by the database to the type the
 * statement's text gives it, as the driver's own parameters are.
 */
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

/** The error svc_batch raises for a name it has neither prepared nor kept (SQLSTATE SVC01). */
function isUnknownStatement(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'SVC01';
}

/** Db.batch through svc_batch, for the database `query` reaches (each batch commits by itself). */
export function svcBatch(query: Queryable['query']): Db['batch'] {
  /** Texts a batch carried and committed: kept in svc_statement_texts. */
  const kept = new Set<string>();
  return async (statements: readonly Statement[]) => {
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
      query<{ item: [number, Record<string, unknown>] }>(BATCH, [
        JSON.stringify(withTexts ? { names, texts, statements: items } : { names, statements: items }),
      ]);
    const namesOnly = texts.every((t) => kept.has(t));
    let rows: { item: [number, Record<string, unknown>] }[];
    try {
      rows = await send(!namesOnly);
    } catch (err) {
      // The kept texts were removed (by hand): nothing ran; the batch goes again with its texts.
      if (!namesOnly || !isUnknownStatement(err)) throw err;
      rows = await send(true);
    }
    for (const t of texts) kept.add(t);
    const out: (Record<string, unknown> | undefined)[] = statements.map(() => undefined);
    for (const { item } of rows) out[item[0]] = item[1];
    return out;
  };
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
