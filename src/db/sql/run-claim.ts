import type { Db, Statement } from '../db.ts';
import { LOCK_CLASSES } from './advisory-locks.ts';
import { RUN_CONTEXT_COLUMNS, type RunContextRow, runContextFromJson } from './run-context.ts';
import { type RunRow, runFromJson } from './runs.ts';

/**
 * The worker's claim of pending runs (the queue itself is described in run-queue.ts).
 *
 * Fairness: candidates are ranked within their organization (oldest first) and taken rank by
 * rank across organizations, so one organization's backlog cannot hold back another's first
 * run; no organization exceeds `orgLimit` running runs across all workers.
 *
 * Exactness without a cluster-wide lock: a claim locks only the organizations it is about to
 * claim for (a transaction-level advisory lock per organization, taken in one fixed order, so
 * two claims never wait for each other in a cycle), and counts their running runs only once
 * the locks are held. Two claims for one organization are thus one after the other, the second
 * seeing the first's runs `running`; claims for different organizations do not wait at all.
 * Which organizations to lock is decided by the same fair ranking read before the locks
 * (PICK); the claim itself (CLAIM) ranks again, with a fresh snapshot, among the locked
 * organizations only, and takes the runs both rankings chose. When something changed in
 * between (another worker took places, a run was canceled), the claim takes fewer runs than
 * were picked and the worker looks again, so the fair order holds across workers too.
 *
 * One round trip: a batch (Db.batch) of the pick, the locks and the claim, each with its own
 * snapshot, in one transaction; the pick's answer goes to the two statements after it in a
 * setting of that transaction (set_config's is_local), since a batch's statements are sent
 * together. The claim returns each run with its context (task, skills, sources, organization),
 * read in the claim's snapshot, in which the run's task necessarily exists. (Migration 0020's
 * svc_lock_then_query did the same in one function call; processes of the previous version
 * call it during an upgrade.)
 *
 * Cost: the organizations with pending runs are found by a loose index scan (one index probe
 * per organization, not one row per pending run), and each contributes at most
 * min(limit, orgLimit - running) of its oldest runs, so the work does not grow with the backlog.
 * The statements are prepared once per connection and planned once, by Db.batch (planning
 * the pick took 0.8 ms and running it 0.2 ms, measured with 4 organizations; a claim of one run,
 * with its context, costs its database backend about 1.1 ms of CPU, against 1.4 ms for the five
 * statements it replaces), so a plan lives on whatever the statistics said when it was made,
 * often a drained queue (no run pending) or, on the embedded database, no statistics at all.
 * The shape is therefore fixed by the query and the indexes, not by the estimates: the
 * recursive scan and the LATERAL ... LIMIT can only be served by runs_pending_org_idx, the one
 * index over pending runs that a statement about organizations may use (migration 0026), and
 * the batch plans without sequential scans. test/run-claim-plans.test.ts checks that a
 * claim planned on a drained queue reads no more runs than it takes when a backlog follows.
 * No SKIP LOCKED: the other writers of a pending run are cancellations and deletions, which
 * the update waits for and then rechecks.
 */

export interface ClaimOptions {
  workerId: string;
  /** The lease's start; null: the database's clock when the locks are held. */
  now: Date | null;
  leaseMs: number;
  /** Runs to claim at most (the worker's free capacity). */
  limit: number;
  /** Running runs one organization may have, across all workers. */
  orgLimit: number;
}

export interface ClaimedRun {
  run: RunRow;
  /** Undefined: the task is gone (deleted with the run while it was being claimed). */
  context: RunContextRow | undefined;
}

export interface Claim {
  runs: ClaimedRun[];
  /**
   * Runs the fair ranking picked before the locks were held. More than `runs`: something
   * changed meanwhile, and looking again may find runs to claim.
   */
  picked: number;
}

/** When the lease a claim gives ends: `now` (a timestamptz expression) plus `args`' leaseMs (claimArgs). */
export const leaseUntil = (now: string, args = '$1') =>
  `${now} + make_interval(secs => (${args}->>'leaseMs')::double precision / 1000)`;

/**
 * The candidates of the organizations in `orgs` and the fair pick ($1: options), given `busy`
 * (running runs per organization).
 */
const RANKED = `candidates AS (
       SELECT o.organization_id, c.id, c.created_at, coalesce(b.n, 0) AS running
         FROM orgs o
         LEFT JOIN busy b ON b.organization_id = o.organization_id
         CROSS JOIN LATERAL (
           SELECT r.id, r.created_at FROM runs r
            WHERE r.organization_id = o.organization_id AND r.status = 'pending'
            ORDER BY r.created_at, r.id
            LIMIT least(($1->>'limit')::int, greatest(($1->>'orgLimit')::int - coalesce(b.n, 0), 0))
         ) c
        WHERE o.organization_id IS NOT NULL
     ), picked AS (
       SELECT id, organization_id FROM candidates
        ORDER BY running + row_number() OVER (PARTITION BY organization_id ORDER BY created_at, id), created_at, id
        LIMIT ($1->>'limit')::int
     )`;

/**
 * Before the locks: the organizations with pending runs (loose index scan), ranked; returns the
 * lock keys of the organizations picked, the organizations, and how many runs were picked.
 * Two organizations whose ids hash alike share a key: their claims wait for each other, no more.
 */
const PICK = `WITH RECURSIVE orgs AS (
       (SELECT organization_id FROM runs WHERE status = 'pending' ORDER BY organization_id LIMIT 1)
       UNION ALL
       SELECT (SELECT r.organization_id FROM runs r
                WHERE r.status = 'pending' AND r.organization_id > orgs.organization_id
                ORDER BY r.organization_id LIMIT 1)
         FROM orgs WHERE orgs.organization_id IS NOT NULL
     ), busy AS (
       -- Every organization's: counted from runs_running_org_idx, cheaper than a join with orgs.
       SELECT organization_id, count(*)::int AS n FROM runs WHERE status = 'running' GROUP BY organization_id
     ), ${RANKED}
     SELECT jsonb_build_object(
              'keys', coalesce(jsonb_agg(DISTINCT hashtext(organization_id::text)), '[]'::jsonb),
              'organizations', coalesce(jsonb_agg(DISTINCT organization_id), '[]'::jsonb),
              'runs', coalesce(jsonb_agg(id), '[]'::jsonb),
              'picked', count(*))
       FROM picked`;

/**
 * With the locks held ($2: what PICK returned): the fair ranking again, among the organizations
 * locked, and the claim of the runs it ranks that PICK picked too. A run the fresh ranking
 * would take but PICK did not (another claim took places meanwhile) is left: the worker picks
 * again, across every organization. One value: the claimed runs with their context, a JSON array.
 */
const CLAIM = `WITH clock AS MATERIALIZED (
       SELECT coalesce(($1->>'now')::timestamptz, clock_timestamp()) AS now
     ), orgs AS (
       SELECT value::uuid AS organization_id FROM jsonb_array_elements_text($2->'organizations')
     ), busy AS (
       SELECT organization_id, count(*)::int AS n FROM runs
        WHERE status = 'running'
          AND organization_id = ANY (ARRAY(SELECT value::uuid FROM jsonb_array_elements_text($2->'organizations')))
        GROUP BY organization_id
     ), ${RANKED}, claimed AS (
       UPDATE runs SET status = 'running', lease_owner = $1->>'workerId',
              lease_expires_at = ${leaseUntil('clock.now')},
              attempts = attempts + 1, started_at = clock.now
         FROM picked, clock
        WHERE runs.id = picked.id AND runs.status = 'pending'
          AND runs.id IN (SELECT value::uuid FROM jsonb_array_elements_text($2->'runs'))
       RETURNING runs.*
     )
     SELECT coalesce(json_agg(json_build_object('run', row_to_json(claimed), 'context', row_to_json(ctx))), '[]'::json) AS claimed
       FROM claimed
       LEFT JOIN LATERAL (SELECT ${RUN_CONTEXT_COLUMNS} FROM tasks t WHERE t.id = claimed.task_id) ctx ON true`;

/** The setting the pick is kept in for the statements after it, for its transaction only. */
const PICKED = "current_setting('svc.claim_picked')::jsonb";

/** PICK, its answer kept for the lock and the claim (set_config's is_local: until the commit). */
const PICK_AND_KEEP = `SELECT set_config('svc.claim_picked', p.picked::text, true)::jsonb AS picked
       FROM (${PICK.replaceAll(/\$1\b/g, '($1::jsonb)')}) AS p(picked)`;

/**
 * The claim locks of the organizations picked, in the order of their keys (so that two claims
 * never wait for each other in a cycle). OFFSET 0 keeps the subquery from being merged into the
 * count, and a volatile function's column is never dropped as unused: each lock is taken.
 */
const LOCK_PICKED = `SELECT count(*)::int AS locked FROM (
       SELECT pg_advisory_xact_lock($1::int, k.key) FROM (
         SELECT e.key::int AS key FROM jsonb_array_elements_text(${PICKED} -> 'keys') AS e(key) ORDER BY 1
       ) AS k OFFSET 0
     ) AS l`;

const CLAIM_PICKED = CLAIM.replaceAll(/\$1\b/g, '($1::jsonb)').replaceAll(/\$2\b/g, `(${PICKED})`);

export function claimArgs(o: ClaimOptions): string {
  return JSON.stringify({
    workerId: o.workerId,
    now: o.now?.toISOString() ?? null,
    leaseMs: o.leaseMs,
    limit: o.limit,
    orgLimit: o.orgLimit,
  });
}

/** The pick as a statement of its own (benchmarks explain it: it is what grows with organizations). */
export function pickStatement(o: ClaimOptions): { sql: string; params: unknown[] } {
  // Alone, its parameter needs a type for the operators to resolve on.
  return { sql: PICK.replaceAll(/\$1\b/g, '($1::jsonb)'), params: [claimArgs(o)] };
}

/**
 * The claim's three statements, a batch (one round trip, one transaction, each statement with
 * a snapshot of its own): the pick, the locks of the organizations it picked, then the claim,
 * whose snapshot is taken once the locks are held.
 */
export function claimStatements(o: ClaimOptions): Statement[] {
  const args = claimArgs(o);
  return [
    { sql: PICK_AND_KEEP, params: [args] },
    { sql: LOCK_PICKED, params: [LOCK_CLASSES.runClaimOrganization] },
    { sql: CLAIM_PICKED, params: [args] },
  ];
}

/** Claims up to `limit` pending runs, with their context (see above). */
export async function claimRuns(db: Db, o: ClaimOptions): Promise<Claim> {
  const [pick, , claim] = await db.batch(claimStatements(o));
  const claimed = (claim?.claimed ?? []) as ClaimedJson[];
  return {
    runs: claimed.map(claimedFromJson),
    picked: Number((pick?.picked as { picked?: number } | undefined)?.picked ?? 0),
  };
}

type ClaimedJson = { run: RunRow; context: RunContextRow | null };

function claimedFromJson(item: ClaimedJson): ClaimedRun {
  return { run: runFromJson(item.run), context: item.context ? runContextFromJson(item.context) : undefined };
}

/**
 * The organization's claim lock, as a claim takes it (LOCK_PICKED; key: hashtext of its id), as a
 * statement of a batch: a statement after it that counts the organization's running runs and
 * looks for its pending ones (run-now.ts, a run claimed at its creation) decides as a claim does.
 */
export function lockOrganizationClaimsStatement(organizationId: string): Statement {
  return {
    sql: 'SELECT true AS locked FROM (SELECT pg_advisory_xact_lock($1::int, hashtext($2::text))) AS l',
    params: [LOCK_CLASSES.runClaimOrganization, organizationId],
  };
}
