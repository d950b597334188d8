// A streamed answer's events (src/runner/model-events.ts) as the standard for Server-Sent Events
// reads them, however the stream is cut into chunks; and the retry waits of model requests
// (src/runner/model-request.ts).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type ServerEvent, serverEvents } from '../src/runner/model-events.ts';
import { askedWaitMs, backoffMs, MAX_RETRY_AFTER_MS } from '../src/runner/model-request.ts';

async function eventsOf(pieces: (string | Uint8Array)[]): Promise<ServerEvent[]> {
  const encoder = new TextEncoder();
  async function* body() {
    for (const p of pieces) yield typeof p === 'string' ? encoder.encode(p) : p;
  }
  const out: ServerEvent[] = [];
  for await (const e of serverEvents(body())) out.push(e);
  return out;
}

/** The text cut into pieces at every position (one cut), and byte by byte. */
function cuts(text: string): Uint8Array[][] {
  const bytes = new TextEncoder().encode(text);
  const ways: Uint8Array[][] = [[bytes], Array.from(bytes, (b) => Uint8Array.of(b))];
  for (let i = 1; i < bytes.length; i++) ways.push([bytes.subarray(0, i), bytes.subarray(i)]);
  return ways;
}

describe('the events of a streamed answer', () => {
  test('data lines are joined, the event field named, comments and other fields ignored, an event sent at its blank line', async () => {
    const stream =
      ': keep-alive\n\ndata: {"a":1}\n\nevent: error\ndata: first\ndata:second\nid: 7\nretry: 10\n\ndata: [DONE]\n\n';
    assert.deepEqual(await eventsOf([stream]), [
      { event: null, data: '{"a":1}' },
      { event: 'error', data: 'first\nsecond' },
      { event: null, data: '[DONE]' },
    ]);
  });

  test('every line end of the standard is one, wherever the chunks are cut, multi-byte characters included', async () => {
    const expected = [
      { event: null, data: 'héllo ✓' },
      { event: null, data: 'two' },
      { event: null, data: 'three' },
    ];
    for (const text of [
      'data: héllo ✓\n\ndata: two\n\ndata: three\n\n',
      'data: héllo ✓\r\n\r\ndata: two\r\n\r\ndata: three\r\n\r\n',
      'data: héllo ✓\r\rdata: two\r\rdata: three\r\r',
      'data: héllo ✓\r\n\ndata: two\r\rdata: three\n\r\n',
    ]) {
      for (const pieces of cuts(text))
        assert.deepEqual(await eventsOf(pieces), expected, JSON.stringify(text));
    }
  });

  test('an event without data is not sent, and one left open when the stream ends is dropped', async () => {
    assert.deepEqual(await eventsOf(['event: ping\n\ndata:\n\ndata: kept\n\ndata: open']), [
      { event: null, data: 'kept' },
    ]);
  });
});

describe('the waits before a model request is retried', () => {
  test('the backoff doubles from half a second to at most 8 s, less up to a quarter of jitter', () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5].map((n) => backoffMs(n, () => 0)),
      [500, 1000, 2000, 4000, 8000, 8000],
    );
    assert.equal(
      backoffMs(0, () => 1),
      375,
    );
  });

  test('the wait a provider asks for is honoured in milliseconds, seconds or as a date, up to a minute', () => {
    const now = Date.parse('2026-12-01T10:00:00Z');
    assert.equal(askedWaitMs({ 'retry-after-ms': '250', 'retry-after': '9' }, now), 250);
    assert.equal(askedWaitMs({ 'retry-after': '1.5' }, now), 1500);
    assert.equal(askedWaitMs({ 'retry-after': 'Tue, 01 Dec 2026 10:00:30 GMT' }, now), 30_000);
    assert.equal(askedWaitMs({ 'retry-after': String(MAX_RETRY_AFTER_MS / 1000) }, now), MAX_RETRY_AFTER_MS);
    // Longer than a minute, in the past, or not a wait at all: the backoff decides.
    for (const after of ['3600', 'Tue, 01 Dec 2026 09:00:00 GMT', 'soon', '-1'])
      assert.equal(askedWaitMs({ 'retry-after': after }, now), undefined, after);
    assert.equal(askedWaitMs({}, now), undefined);
  });
});
