// One peer's worker process for the peers benchmark (bench/peers.ts): Graphile Worker, pg-boss
// or BullMQ, each with a handler that makes one model call, or `ceiling`: the same calls with
// no queue at all. Every handler makes the call the service's model client makes
// (src/runner/model-client.ts): the official `openai` SDK, same version, a streamed Chat
// Completions request with usage, read to its end, over Node's built-in fetch.
//
//   node bench/peers-worker.ts <system> <json options>
//
// Prints `ready` on stdout once its worker takes jobs (`ceiling`: `done <calls/s>` at the end);
// SIGTERM stops it the library's own way.
import OpenAI from 'openai';

export type PeerName = 'graphile-worker' | 'pg-boss' | 'bullmq';

export interface PeerWorkerOptions {
  /** PostgreSQL URL (graphile-worker, pg-boss) or redis://host:port (bullmq). */
  url: string;
  modelUrl: string;
  concurrency: number;
  /** The queue (pg-boss, bullmq) and the Redis key prefix (bullmq). */
  queue: string;
  /** Recurring jobs due every minute, one per marker (the slot measure). */
  cronMarkers?: string[];
  /** `ceiling` only: how many calls. */
  calls?: number;
}

/** The task's prompt with a marker the model stand-in reads back (bench/baselines.ts). */
export const probePrompt = (marker: string) => `Summarise the week in five bullet points. probe:${marker}`;
export const TASK = 'model_call';

function modelCaller(modelUrl: string) {
  const client = new OpenAI({
    apiKey: 'sk-bench-model-key',
    baseURL: modelUrl,
    maxRetries: 4,
    timeout: 60_000,
  });
  return async (prompt: string): Promise<string> => {
    const stream = await client.chat.completions.create({
      model: 'openai/gpt-4o-mini',
      messages: [
        {
          role: 'system',
          content: 'The current date and time is Monday, 3 March 2025, 08:30 (Europe/Berlin).',
        },
        { role: 'user', content: prompt },
      ],
      max_tokens: 4096,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    return text;
  };
}

async function graphileWorker(o: PeerWorkerOptions, call: (p: string) => Promise<string>) {
  const { run, Logger } = await import('graphile-worker');
  const crontab = (o.cronMarkers ?? [])
    .map((m, i) => `* * * * * ${TASK} ?id=slot${i} ${JSON.stringify({ prompt: probePrompt(m) })}`)
    .join('\n');
  const runner = await run({
    connectionString: o.url,
    concurrency: o.concurrency,
    noHandleSignals: true,
    logger: new Logger(() => () => undefined),
    taskList: {
      [TASK]: async (payload) => {
        await call((payload as { prompt: string }).prompt);
      },
    },
    ...(crontab && { crontab }),
  });
  return () => runner.stop();
}

async function pgBoss(o: PeerWorkerOptions, call: (p: string) => Promise<string>) {
  const { PgBoss } = await import('pg-boss');
  // A schedule's jobs are sent when pg-boss's cron monitor finds their minute due, every
  // cronMonitorIntervalSeconds (30 s by default), through a queue polled every
  // cronWorkerIntervalSeconds (5 s): the slot measure's worker checks both every second, the
  // least pg-boss allows, so its jobs are sent within about a second of the minute.
  const cron = o.cronMarkers?.length ? { cronMonitorIntervalSeconds: 1, cronWorkerIntervalSeconds: 1 } : {};
  const boss = new PgBoss({ connectionString: o.url, useListenNotify: true, ...cron });
  boss.on('error', (err) => process.stderr.write(`pg-boss: ${String(err)}\n`));
  await boss.start();
  // With notify on, a worker that found a job waits notifyPollingIntervalSeconds (30 s) before
  // fetching again unless woken: one job per fetch would starve. Batches, as pg-boss is meant to
  // be run for throughput: two workers each taking half the concurrency per fetch, fetching again
  // at once while batches come back full; a batch's jobs run at once.
  const lanes = Math.min(2, o.concurrency);
  const batchSize = Math.ceil(o.concurrency / lanes);
  await boss.work<{ prompt: string }>(
    o.queue,
    { localConcurrency: lanes, batchSize, burstWhenBatchFull: true },
    async (jobs) => {
      await Promise.all(jobs.map((job) => call(job.data.prompt)));
    },
  );
  for (const [i, m] of (o.cronMarkers ?? []).entries()) {
    await boss.schedule(o.queue, '* * * * *', { prompt: probePrompt(m) }, { key: `slot${i}` });
  }
  return () => boss.stop({ graceful: true });
}

async function bullmq(o: PeerWorkerOptions, call: (p: string) => Promise<string>) {
  const { Queue, Worker } = await import('bullmq');
  const u = new URL(o.url);
  const connection = { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: null };
  const worker = new Worker<{ prompt: string }>(
    o.queue,
    async (job) => {
      await call(job.data.prompt);
    },
    { connection, concurrency: o.concurrency, prefix: o.queue },
  );
  await worker.waitUntilReady();
  const queue = new Queue(o.queue, { connection, prefix: o.queue });
  for (const [i, m] of (o.cronMarkers ?? []).entries()) {
    await queue.upsertJobScheduler(
      `slot${i}`,
      { pattern: '* * * * *' },
      { name: TASK, data: { prompt: probePrompt(m) } },
    );
  }
  return async () => {
    await worker.close();
    await queue.close();
  };
}

async function ceiling(o: PeerWorkerOptions, call: (p: string) => Promise<string>) {
  const calls = o.calls ?? 0;
  let next = 0;
  const lane = async () => {
    while (next < calls) {
      next++;
      await call(probePrompt('ceiling'));
    }
  };
  // Connections warmed first, as a worker's are by the time it has taken its first jobs.
  await Promise.all(Array.from({ length: o.concurrency }, () => call(probePrompt('warm'))));
  const start = performance.now();
  await Promise.all(Array.from({ length: o.concurrency }, lane));
  process.stdout.write(`done ${calls / ((performance.now() - start) / 1000)}\n`);
}

async function main(): Promise<void> {
  const [system, json] = process.argv.slice(2);
  const o = JSON.parse(json ?? '{}') as PeerWorkerOptions;
  const call = modelCaller(o.modelUrl);
  if (system === 'ceiling') {
    await ceiling(o, call);
    process.exit(0);
  }
  const start = { 'graphile-worker': graphileWorker, 'pg-boss': pgBoss, bullmq }[system as PeerName];
  if (!start)
    throw new Error('usage: node bench/peers-worker.ts graphile-worker|pg-boss|bullmq|ceiling <json>');
  const stop = await start(o, call);
  process.stdout.write('ready\n');
  process.on('SIGTERM', () => {
    void stop().finally(() => process.exit(0));
  });
}

if (process.argv[1]?.endsWith('peers-worker.ts')) await main();
