// The money path as a property: many runs against a provider stand-in that counts every answer
// it sends, while tasks are deleted, paused and edited and worker processes are stopped with
// SIGTERM and killed with SIGKILL. Afterwards the usage ledger, `GET /stats` and
// `GET /billing/status` must equal what the stand-in sent, to the token and the cent.
//
// On PostgreSQL: one api process and 3 worker processes, at least 200 runs. On PGlite: the one
// process (all roles) on its data directory, stopped and killed the same way, fewer runs.
//
// What is promised (docs/api.md, "Runs and statistics"): a call's usage is written as soon as
// its answer has been read, before anything else is done with it. A worker killed outright in
// the instant between reading an answer and that write loses the answer's usage; nothing can
// close that window, so the kills here come at a moment where every answer sent has been
// recorded (answers are held meanwhile), and while requests, tool rounds and writes of other
// runs are in flight. Likewise a SIGTERM comes once every answer sent has been recorded, and its
// grace period ends while answers are held: a call cut off before its answer came has cost
// nothing. A task is deleted the same way (its run in flight is stopped, as by a lost lease),
// answers held until that run's calls are cut off.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { TEST_DATABASE_URL } from '../helpers/db.ts';
import { type ServerProcess, startServerProcess } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';
import { type Backend, call, createBackend, createOrg, kill, type Org } from './fault-kit.ts';
import { type CountingModel, startCountingModel } from './usage-kit.ts';

const POSTGRES = Boolean(TEST_DATABASE_URL);
const MIN_RUNS = POSTGRES ? 200 : 60;
const WORKERS = POSTGRES ? 3 : 1;
const ORGS = POSTGRES ? 4 : 3;
const TASKS_PER_ORG = POSTGRES ? 6 : 4;
/** The paid plan's usage credits (usageCreditsCents cannot be overridden). */
const PAID_CREDITS_CENTS = 2000;

type Fault = 'delete' | 'pause' | 'edit' | 'sigkill' | 'sigterm';
const FAULTS: Fault[] = [
  'edit',
  'sigkill',
  'delete',
  'pause',
  'sigterm',
  'edit',
  'delete',
  'sigkill',
  'pause',
  'sigterm',
];

interface LiveTask {
  id: string;
  org: number;
  /** Every prompt the task has had: a run in flight keeps the one it was claimed with. */
  prompts: string[];
}

describe('the usage ledger under chaos', () => {
  let backend: Backend;
  let model: CountingModel;
  let api: ServerProcess;
  const workers: ServerProcess[] = [];
  const everyProcess: ServerProcess[] = [];
  let incarnation = 0;
  const keyOf = new Map<ServerProcess, string>();

  before(async () => {
    backend = await createBackend();
    // 1 to 3 calls per run (tool rounds), 25 to 100 cents each: eighths of a dollar add up exactly.
    model = await startCountingModel(({ step, index }) => ({
      toolCall: step < 1 + (index % 3),
      totalTokens: 100 + (index % 7) * 37,
      costUsd: (1 + (index % 4)) * 0.25,
      delayMs: 5 + (index % 5) * 10,
    }));
  });
  after(async () => {
    for (const p of everyProcess) await kill(p);
    await model?.close();
    await backend?.dispose();
  });

  /** A process with a model API key of its own, so the stand-in knows whom it answers. */
  async function spawn(role: string | undefined): Promise<ServerProcess> {
    const key = `sk-chaos-${++incarnation}`;
    const p = await startServerProcess(
      {
        ...backend.env,
        ...(role && { SVC_ROLE: role }),
        SVC_MODEL_BASE_URL: model.url,
        SVC_MODEL_API_KEY: key,
        // Short, so that a killed worker's runs are taken over soon; not shorter: a lease lost by a
        // live worker stops its run, and an answer arriving then is lost (docs/api.md). With 2 s
        // (renewed every 667 ms), 4 of these tests at once beside 2 busy loops, a worker started
        // a moment before sometimes renewed 1.0-1.6 s late and lost a run (3 of 56 runs failed so).
        SVC_RUN_LEASE_SECONDS: '4',
        SVC_ORG_CONCURRENCY: '16',
        // Answers are held through a SIGTERM's grace period, which ends with calls cut off.
        SVC_SHUTDOWN_GRACE_SECONDS: '1',
        SVC_ALLOW_PRIVATE_URLS: 'true',
        // A process replacing one killed on the embedded database opens its data directory again
        // (recovery included): with 4 of these tests at once beside 2 busy loops, on a slow day of
        // the 2-core machine, it did not listen within the default 30 s (the test failed at a
        // replacement, with the previous commit's code as with this one's; alone, it passed).
      },
      120_000,
    );
    keyOf.set(p, key);
    everyProcess.push(p);
    return p;
  }

  test(`${MIN_RUNS}+ runs with ${WORKERS} worker process(es) stopped and killed, tasks deleted, paused and edited: ledger, stats and billing equal what the provider sent`, async (t) => {
    if (POSTGRES) {
      api = await spawn('api');
      for (let i = 0; i < WORKERS; i++) workers.push(await spawn('worker'));
    } else {
      api = await spawn(undefined);
      workers.push(api);
    }
    const base = () => api.url;

    const orgs: Org[] = [];
    for (let i = 0; i < ORGS; i++) orgs.push(await createOrg(base()));
    const tasks: LiveTask[] = [];
    const newTask = async (org: number) => {
      const prompt = `org${org} ${randomUUID()}`;
      const res = await call(base(), 'POST', '/api/svc/tasks', {
        key: orgs[org]?.apiKey,
        body: {
          organizationId: orgs[org]?.organizationId,
          name: 'Chaos',
          prompt,
          schedule: 'daily',
        },
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      tasks.push({ id: res.body.id, org, prompts: [prompt] });
    };
    for (let o = 0; o < ORGS; o++) for (let t = 0; t < TASKS_PER_ORG; t++) await newTask(o);

    // The statistics of every organization through the API.
    const stats = async () => {
      const out = [];
      for (const org of orgs) {
        const res = await call(base(), 'GET', `/api/svc/stats?organizationId=${org.organizationId}`, {
          key: org.apiKey,
        });
        assert.equal(res.status, 200, JSON.stringify(res.body));
        out.push(res.body as { totalTokensUsed: number; totalCostCents: number });
      }
      return out;
    };
    const recordedTokens = async () => (await stats()).reduce((n, s) => n + s.totalTokensUsed, 0);
    /** Answers held: waits (a while at most) until every answer sent is on the ledger. */
    const quiesce = async () => {
      model.pause();
      await waitFor(
        'every answer sent to be recorded',
        async () => ((await recordedTokens()) === model.totals().tokens ? true : undefined),
        { timeoutMs: 15_000, everyMs: 50 },
      ).catch(() => undefined); // The final comparison reports any difference.
    };
    const replace = async (victim: ServerProcess) => {
      const key = keyOf.get(victim) ?? '';
      // A dead process's requests are never answered (a provider charges nothing for those).
      model.drop(key);
      model.resume();
      const role = POSTGRES ? 'worker' : undefined;
      const next = await spawn(role);
      workers.splice(workers.indexOf(victim), 1, next);
      if (!POSTGRES) api = next;
    };

    let created = 0;
    let faultsDone = 0;
    const counts: Record<Fault, number> = { delete: 0, pause: 0, edit: 0, sigkill: 0, sigterm: 0 };
    let stopDriving = false;

    // Run now, again and again, on every task that has no run in flight (409 otherwise).
    const drive = async () => {
      while (!stopDriving) {
        for (const task of [...tasks]) {
          if (stopDriving) break;
          try {
            const res = await call(base(), 'POST', `/api/svc/tasks/${task.id}/run`, {
              key: orgs[task.org]?.apiKey,
            });
            if (res.status === 202) created++;
          } catch {
            // The process is being restarted (PGlite): try again on the next round.
          }
        }
        if (created >= MIN_RUNS && faultsDone === FAULTS.length) stopDriving = true;
        await new Promise((r) => setTimeout(r, 50));
      }
    };

    const injure = async () => {
      for (const [i, fault] of FAULTS.entries()) {
        // Let runs pile up between faults.
        await waitFor(
          'runs before the next fault',
          async () => (created >= ((i + 1) * MIN_RUNS) / (FAULTS.length + 2) ? true : undefined),
          {
            timeoutMs: 60_000,
            everyMs: 50,
          },
        );
        const victimTask = tasks[(i * 7) % tasks.length];
        switch (fault) {
          case 'delete': {
            if (!victimTask) break;
            // Answers held and every answer sent recorded first, as for a kill: deleting the task
            // stops its run in flight (its worker's lease renewal finds it gone), and an answer
            // cut off as it arrives is recorded at an estimate (docs/api.md), which these exact
            // books could not equal. The deleted run's held calls are then cut off by that stop
            // before answers resume, so none of them is sent.
            await quiesce();
            const res = await call(base(), 'DELETE', `/api/svc/tasks/${victimTask.id}`, {
              key: orgs[victimTask.org]?.apiKey,
            });
            assert.equal(res.status, 204);
            tasks.splice(tasks.indexOf(victimTask), 1);
            await waitFor(
              "the deleted task's calls to be cut off",
              async () => (model.waitingFor((p) => victimTask.prompts.includes(p)) === 0 ? true : undefined),
              { timeoutMs: 15_000, everyMs: 50 },
            );
            model.resume();
            await newTask(victimTask.org);
            break;
          }
          case 'pause':
          case 'edit': {
            if (!victimTask) break;
            const prompt = `org${victimTask.org} edited ${randomUUID()}`;
            const body = fault === 'pause' ? { status: 'paused' } : { name: `Edited ${i}`, prompt };
            const res = await call(base(), 'PATCH', `/api/svc/tasks/${victimTask.id}`, {
              key: orgs[victimTask.org]?.apiKey,
              body,
            });
            assert.equal(res.status, 200, JSON.stringify(res.body));
            if (fault === 'edit') victimTask.prompts.push(prompt);
            break;
          }
          case 'sigkill': {
            const victim = workers[i % workers.length] as ServerProcess;
            await quiesce();
            await kill(victim);
            await replace(victim);
            break;
          }
          case 'sigterm': {
            const victim = workers[i % workers.length] as ServerProcess;
            // Answers held and every answer sent recorded first: the grace period then ends with
            // the victim's calls cut off before their answers came (they cost nothing). Holding
            // them only after the SIGTERM left a race on a loaded machine: an answer sent just
            // before could still be unread when the grace period ended.
            await quiesce();
            victim.child.kill('SIGTERM');
            assert.equal(await victim.exited, 0);
            await replace(victim);
            break;
          }
        }
        counts[fault]++;
        faultsDone++;
      }
    };

    // A failed fault must not leave the driver running (the test would never end).
    await Promise.all([
      drive(),
      injure().catch((err: unknown) => {
        stopDriving = true;
        throw err;
      }),
    ]);

    // Everything settles: each remaining task's latest run has ended and nothing waits on the model.
    await waitFor(
      'every run to end',
      async () => {
        for (const task of tasks) {
          const res = await call(base(), 'GET', `/api/svc/tasks/${task.id}/runs?limit=1`, {
            key: orgs[task.org]?.apiKey,
          });
          const latest = res.body[0];
          if (latest && !['completed', 'failed'].includes(latest.status)) return undefined;
        }
        return model.waiting === 0 ? true : undefined;
      },
      { timeoutMs: 60_000, everyMs: 200 },
    );

    const sent = model.totals();
    await waitFor('the ledger to catch up', async () =>
      (await recordedTokens()) === sent.tokens ? true : undefined,
    ).catch(() => undefined);

    assert.ok(created >= MIN_RUNS, `${created} runs created`);
    assert.deepEqual(counts, { delete: 2, pause: 2, edit: 2, sigkill: 2, sigterm: 2 });
    const finalStats = await stats();
    for (const [o, org] of orgs.entries()) {
      const own = model.totals((prompt) => prompt.startsWith(`org${o} `));
      assert.deepEqual(
        { tokens: finalStats[o]?.totalTokensUsed, cents: finalStats[o]?.totalCostCents },
        own,
        `GET /stats of organization ${o}`,
      );
      const billing = await call(
        base(),
        'GET',
        `/api/svc/billing/status?organizationId=${org.organizationId}`,
        {
          key: org.apiKey,
        },
      );
      assert.equal(billing.body.usageCreditsCents, PAID_CREDITS_CENTS);
      assert.equal(
        billing.body.usageCostCents,
        Math.max(0, own.cents - PAID_CREDITS_CENTS),
        `billing/status of organization ${o}`,
      );
    }

    // The ledger itself, read from the database once every process has stopped: each answer
    // sent is there once (one call row each), and the runs' rows add up to the same figures.
    for (const p of workers) if (p !== api) assert.equal(await stopProcess(p), 0);
    assert.equal(await stopProcess(api), 0);
    const [ledger] = await backend.query<{ tokens: number; cents: number }>(
      'SELECT sum(tokens_used)::int AS tokens, sum(cost_cents)::float8 AS cents FROM usage_ledger',
    );
    const [calls] = await backend.query<{ n: number; tokens: number; cents: number }>(
      'SELECT count(*)::int AS n, sum(tokens_used)::int AS tokens, sum(cost_cents)::float8 AS cents FROM usage_calls',
    );
    assert.deepEqual(ledger, sent);
    assert.deepEqual(calls, { n: model.delivered.length, ...sent });
    // Answer by answer, by the provider's id of each.
    const ids = await backend.query<{ provider_call_id: string }>('SELECT provider_call_id FROM usage_calls');
    assert.deepEqual(ids.map((r) => r.provider_call_id).sort(), model.delivered.map((d) => d.id).sort());
    t.diagnostic(
      `${created} runs, ${model.delivered.length} answers, ${sent.tokens} tokens, ${sent.cents} cents`,
    );
  });
});

async function stopProcess(p: ServerProcess): Promise<number | null> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return p.child.exitCode;
  p.child.kill('SIGTERM');
  return p.exited;
}
