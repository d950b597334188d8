// A model provider stand-in that keeps the books: every answer it sends in full is counted
// (tokens, cost, the API key that asked), the way a provider bills. The usage tests compare the
// service's ledger, statistics and billing status with these counts. It can hold answers
// (pause, per request), and drop the requests of a worker that was killed: a provider charges
// nothing for an answer it never sent.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** How the stand-in answers one request. */
export interface Answer {
  /** Call a tool (one the service does not have, so the model is told so and asked again). */
  toolCall: boolean;
  totalTokens: number;
  /** The provider-reported cost, US dollars (multiples of 1/8 keep every sum exact). */
  costUsd: number;
  delayMs?: number;
  /** Answer only once this settles. */
  hold?: Promise<unknown>;
  /** Send everything up to the usage, then neither `[DONE]` nor the end of the response. */
  stallAfterUsage?: boolean;
  /** The usage object sent instead of one made from the figures above (which still count). */
  rawUsage?: Record<string, unknown>;
}

export interface AskedRequest {
  /** The last user message (the task's prompt). */
  prompt: string;
  /** The API key the service sent (one per worker process in the chaos test). */
  key: string;
  /** 1 for the first call of a run, 2 after one tool round, ... */
  step: number;
  index: number;
}

export interface Delivered {
  id: string;
  key: string;
  prompt: string;
  totalTokens: number;
  costUsd: number;
}

export interface CountingModel {
  url: string;
  delivered: Delivered[];
  /** Requests received and neither answered nor dropped yet. */
  readonly waiting: number;
  /** Requests received so far. */
  readonly received: number;
  /** Requests received and neither answered nor cut off yet, of the prompts `match` accepts. */
  waitingFor(match: (prompt: string) => boolean): number;
  /** Holds every answer not yet sent until resume(). */
  pause(): void;
  resume(): void;
  /** Never answers the requests of this key (its process is dead): they are cut off unanswered. */
  drop(key: string): void;
  /** Tokens and cost (cents) of the answers sent, of the prompts `match` accepts. */
  totals(match?: (prompt: string) => boolean): { tokens: number; cents: number };
  close(): Promise<void>;
}

interface Message {
  role: string;
  content: string | null;
}

export async function startCountingModel(decide: (r: AskedRequest) => Answer): Promise<CountingModel> {
  const delivered: Delivered[] = [];
  /** Requests waiting for their answer: the key that asked and the prompt. */
  const open = new Map<ServerResponse, { key: string; prompt: string }>();
  const dropped = new Set<string>();
  let received = 0;
  let gate: { promise: Promise<void>; open(): void } | undefined;

  const server = createServer(async (req, res) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const body = JSON.parse(raw) as { model: string; messages: Message[] };
    const key = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    const index = received++;
    const prompt = body.messages.filter((m) => m.role === 'user').at(-1)?.content ?? '';
    const step = body.messages.filter((m) => m.role === 'assistant').length + 1;
    const answer = decide({ prompt, key, step, index });
    open.set(res, { key, prompt });
    // A client that goes away (aborted, killed) is no longer waiting for this answer.
    res.on('close', () => open.delete(res));
    try {
      if (answer.delayMs) await new Promise((r) => setTimeout(r, answer.delayMs));
      if (answer.hold) await answer.hold.catch(() => undefined);
      while (gate) await gate.promise;
      if (res.destroyed || dropped.has(key)) {
        res.destroy();
        return;
      }
      const id = `chatcmpl-${index}`;
      // Everything below is written at once: from here the answer counts as sent.
      delivered.push({ id, key, prompt, totalTokens: answer.totalTokens, costUsd: answer.costUsd });
      writeAnswer(res, id, body.model, answer);
    } finally {
      open.delete(res);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    delivered,
    get waiting() {
      return open.size;
    },
    get received() {
      return received;
    },
    waitingFor(match) {
      let n = 0;
      for (const { prompt } of open.values()) if (match(prompt)) n++;
      return n;
    },
    pause() {
      if (gate) return;
      let release = () => {};
      const promise = new Promise<void>((r) => {
        release = r;
      });
      gate = { promise, open: release };
    },
    resume() {
      const g = gate;
      gate = undefined;
      g?.open();
    },
    drop(key) {
      dropped.add(key);
      for (const [res, o] of open) if (o.key === key) res.destroy();
    },
    totals(match = () => true) {
      let tokens = 0;
      let cents = 0;
      for (const d of delivered) {
        if (!match(d.prompt)) continue;
        tokens += d.totalTokens;
        cents += d.costUsd * 100;
      }
      return { tokens, cents };
    },
    close: () =>
      new Promise<void>((resolve) => {
        gate?.open();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The answer as a streamed Chat Completion: role, content or a tool call, finish, usage. */
function writeAnswer(res: ServerResponse, id: string, model: string, a: Answer): void {
  const event = (data: object) =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', model, ...data })}\n\n`;
  const choice = (delta: object, finish: string | null) => ({
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(event(choice({ role: 'assistant', content: '' }, null)));
  if (a.toolCall) {
    const call = {
      index: 0,
      id: `call_${id}`,
      type: 'function',
      function: { name: 'no_such_tool', arguments: '{}' },
    };
    res.write(event(choice({ tool_calls: [call] }, null)));
    res.write(event(choice({}, 'tool_calls')));
  } else {
    res.write(event(choice({ content: `Answer ${id}` }, null)));
    res.write(event(choice({}, 'stop')));
  }
  const usage = a.rawUsage ?? {
    prompt_tokens: a.totalTokens - 1,
    completion_tokens: 1,
    total_tokens: a.totalTokens,
    cost: a.costUsd,
  };
  res.write(event({ choices: [], usage }));
  if (!a.stallAfterUsage) res.end('data: [DONE]\n\n');
}
