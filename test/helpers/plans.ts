import type { Queryable } from '../../src/db/db.ts';

/** A node of a plan from EXPLAIN (ANALYZE, FORMAT JSON), the fields the tests read. */
export interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/** Rows of `relation` a plan read (returned or filtered out), over all its loops. */
export function rowsRead(node: PlanNode, relation: string): number {
  const own =
    node['Relation Name'] === relation
      ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops']
      : 0;
  return own + (node.Plans ?? []).reduce((sum, child) => sum + rowsRead(child, relation), 0);
}

/** The plan of `statement` as executed (EXPLAIN ANALYZE runs it), on either backend. */
export async function explainAnalyze(
  tx: Queryable,
  statement: string,
  params?: readonly unknown[],
): Promise<PlanNode> {
  const [row] = await tx.query<{ 'QUERY PLAN': unknown }>(
    `EXPLAIN (ANALYZE, FORMAT JSON) ${statement}`,
    params,
  );
  const value = row?.['QUERY PLAN'];
  const plan = (typeof value === 'string' ? JSON.parse(value) : value) as [{ Plan: PlanNode }];
  return plan[0].Plan;
}
