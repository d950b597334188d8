import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import { createLogger, infoLineWriter } from '../src/lib/logger.ts';

function captured(level = 'info') {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { log: createLogger(level, sink), lines };
}

/** Runs `code` (an ES module importing the logger) in a fresh Node process; its standard output. */
function runNode(code: string): string {
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
    encoding: 'utf8',
    cwd: new URL('..', import.meta.url).pathname,
  });
  assert.equal(run.status, 0, run.stderr);
  return run.stdout;
}

describe('logs', () => {
  test('a fixed-shape line is written as pino writes the same fields', () => {
    const { log, lines } = captured();
    log.info({ reqId: 'r-1', status: 200, route: '/a "b"' }, 'request');
    infoLineWriter(log)(`"reqId":"r-1","status":200,"route":${JSON.stringify('/a "b"')}`, 'request');
    assert.equal(lines.length, 2);
    const [byPino, byWriter] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.ok(byPino && byWriter);
    assert.deepEqual(Object.keys(byWriter), Object.keys(byPino));
    assert.deepEqual({ ...byWriter, time: 0 }, { ...byPino, time: 0 });
    assert.ok(lines[1]?.endsWith('}\n'));
  });

  test('a fixed-shape line follows the logger level', () => {
    const { log, lines } = captured('warn');
    infoLineWriter(log)('"a":1', 'request');
    assert.equal(lines.length, 0);
    log.level = 'info';
    infoLineWriter(log)('"a":1', 'request');
    assert.equal(lines.length, 1);
  });

  test("a child logger's fixed-shape line goes through the child, without redaction", () => {
    const { log, lines } = captured();
    infoLineWriter(log.child({ part: 'x' }))('"token":"t-1"', 'm');
    const line = JSON.parse(lines[0] ?? '{}') as Record<string, unknown>;
    assert.equal(line.part, 'x');
    assert.equal(line.token, 't-1');
    assert.equal(line.msg, 'm');
  });

  test('credentials are redacted at the top level, one level down and in request headers, in lines and in bindings', () => {
    const { log, lines } = captured();
    log.info(
      {
        apiKey: 'sk-top',
        token: 't-top',
        password: 'p-top',
        webhookSecret: 'whsec-top',
        source: { token: 't-nested', apiKey: 'sk-nested', password: 'p-nested', name: 'kept' },
        req: { headers: { authorization: 'Bearer a', cookie: 'session=c', accept: 'kept' } },
        headers: { authorization: 'Bearer b' },
        taskId: 'kept',
      },
      'm',
    );
    log
      .child({ token: 't-binding' })
      .warn({ err: Object.assign(new Error('boom'), { apiKey: 'sk-err' }) }, 'w');
    const text = lines.join('');
    for (const secret of ['sk-', 't-top', 't-nested', 't-binding', 'p-', 'whsec-', 'Bearer', 'session=']) {
      assert.ok(!text.includes(secret), `${secret} was logged: ${text}`);
    }
    const [line, child] = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(line?.apiKey, '[redacted]');
    assert.deepEqual(line?.source, {
      token: '[redacted]',
      apiKey: '[redacted]',
      password: '[redacted]',
      name: 'kept',
    });
    assert.deepEqual(line?.req, {
      headers: { authorization: '[redacted]', cookie: '[redacted]', accept: 'kept' },
    });
    assert.equal(line?.taskId, 'kept');
    assert.equal(child?.token, '[redacted]');
    assert.equal((child?.err as { message?: string } | undefined)?.message, 'boom');
  });

  test("standard output gets a turn's lines when the turn ends, in order, and the lines still waiting at exit", () => {
    const out = runNode(`
      import { writeSync } from 'node:fs';
      import { createLogger } from './src/lib/logger.ts';
      const log = createLogger('info');
      log.info('one');
      log.info('two');
      // Written directly, so it lands before the two lines that wait for the turn's end.
      writeSync(1, 'direct\\n');
      setImmediate(() => {
        log.info('three');
        process.exit(0);
      });
    `);
    const msgs = out
      .trim()
      .split('\n')
      .map((l) => (l.startsWith('{') ? (JSON.parse(l) as { msg: string }).msg : l));
    assert.deepEqual(msgs, ['direct', 'one', 'two', 'three']);
  });

  test('a turn with more than 64 KiB of lines writes them before it ends', () => {
    const out = runNode(`
      import { writeSync } from 'node:fs';
      import { createLogger } from './src/lib/logger.ts';
      const log = createLogger('info');
      const long = 'x'.repeat(70 * 1024);
      log.info(long);
      writeSync(1, 'direct\\n');
      log.info('after');
    `);
    const msgs = out
      .trim()
      .split('\n')
      .map((l) => (l.startsWith('{') ? (JSON.parse(l) as { msg: string }).msg.slice(0, 5) : l));
    assert.deepEqual(msgs, ['xxxxx', 'direct', 'after']);
  });
});
