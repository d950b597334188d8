// The byte bound on what a model provider, an MCP server or an OAuth server sends back
// (src/runner/capped-response.ts), on bodies built chunk by chunk: what passes is unchanged,
// what passes the bound fails and stops the transfer, and the body is read at its reader's pace.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { capResponse, ResponseTooLargeError } from '../src/runner/capped-response.ts';

const encoder = new TextEncoder();

/** A response whose body yields `chunks` one per pull, recording what was pulled and whether it was canceled. */
function source(chunks: string[], contentType = 'application/json') {
  const state = { pulled: 0, canceled: undefined as unknown };
  const body = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        const chunk = chunks[state.pulled];
        if (chunk === undefined) return controller.close();
        state.pulled++;
        controller.enqueue(encoder.encode(chunk));
      },
      cancel(reason) {
        state.canceled = reason;
      },
    },
    { highWaterMark: 0 },
  );
  return { response: new Response(body, { status: 200, headers: { 'content-type': contentType } }), state };
}

describe('the byte bound on answers', () => {
  test('a body within the bound reads as sent, with its status and headers', async () => {
    const { response } = source(['{"a":', '1}']);
    const capped = capResponse(response, 100);
    assert.equal(capped.status, 200);
    assert.equal(capped.headers.get('content-type'), 'application/json');
    assert.deepEqual(await capped.json(), { a: 1 });
  });

  test('a body past the bound fails with the bound named, tells the owner first and stops the transfer', async () => {
    const { response, state } = source(['x'.repeat(60), 'x'.repeat(60), 'never read']);
    let told: ResponseTooLargeError | undefined;
    const capped = capResponse(response, 100, (err) => {
      told = err;
    });
    await assert.rejects(capped.text(), (err: unknown) => {
      assert.ok(err instanceof ResponseTooLargeError);
      assert.equal(err.message, 'the answer was larger than 100 bytes');
      return true;
    });
    assert.ok(told instanceof ResponseTooLargeError);
    assert.equal(state.canceled, told, 'the source was canceled with the error');
    assert.equal(state.pulled, 2, 'nothing was read after the chunk that passed the bound');
  });

  test('an event stream is bounded per event, blank lines split across chunks included', async () => {
    // Each event is 60 bytes; together far more than the bound of 100.
    const event = `data: ${'y'.repeat(52)}\n\n`;
    const chunks = [event, event.slice(0, 59), '\n', event.replace('\n\n', '\r\n'), '\r\n', event];
    const { response } = source(chunks, 'text/event-stream');
    const text = await capResponse(response, 100).text();
    assert.equal(text, chunks.join(''));
  });

  test('one event of a stream that never ends its line fails', async () => {
    const { response, state } = source(['data: ', 'z'.repeat(80), 'z'.repeat(80), 'z'], 'text/event-stream');
    await assert.rejects(
      capResponse(response, 100).text(),
      /one event of the answer was larger than 100 bytes/,
    );
    assert.ok(state.canceled instanceof ResponseTooLargeError);
  });

  test('the body is read only as fast as its reader reads, and a reader that stops cancels the source', async () => {
    const { response, state } = source(['a', 'b', 'c', 'd']);
    const reader = capResponse(response, 100).body?.getReader();
    assert.ok(reader);
    assert.equal((await reader.read()).done, false);
    // Let any read-ahead happen.
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(state.pulled, 1);
    await reader.cancel('not wanted');
    assert.equal(state.canceled, 'not wanted');
  });

  test('a source that fails fails the body with its error', async () => {
    const failing = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.error(new Error('connection reset'));
      },
    });
    const capped = capResponse(new Response(failing, { status: 200 }), 100);
    await assert.rejects(capped.text(), /connection reset/);
  });
});
