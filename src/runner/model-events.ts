// The events of a streamed answer (Server-Sent Events, as the HTML standard defines them):
// lines ended by "\r\n", "\n" or "\r"; "data:" lines joined with "\n"; "event:" naming the event;
// comments (":") and other fields ignored; an event dispatched at the blank line after it, and
// only if it carried data. An event left open when the stream ends is dropped, as the standard
// says. One event is bounded before it reaches here (the transport's byte bound per event).
// An answer that is not an event stream (a whole completion as JSON) does not come here.

export interface ServerEvent {
  /** The "event:" field, or null. */
  event: string | null;
  data: string;
}

/** The events of `body` as they complete. */
export async function* serverEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<ServerEvent> {
  const decoder = new TextDecoder();
  const lines = new LineSplitter();
  let data: string | undefined;
  let event: string | null = null;
  for await (const chunk of body) {
    for (const line of lines.push(decoder.decode(chunk, { stream: true }))) {
      if (line === '') {
        if (data) yield { event, data };
        data = undefined;
        event = null;
        continue;
      }
      if (line.charCodeAt(0) === 0x3a) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? '' : line.slice(colon + 1);
      if (value.charCodeAt(0) === 0x20) value = value.slice(1);
      if (field === 'data') data = data === undefined ? value : `${data}\n${value}`;
      else if (field === 'event') event = value;
    }
  }
}

/** Splits text that arrives in pieces into lines, whichever of the three line ends they use. */
class LineSplitter {
  #rest = '';
  /** The previous piece ended with "\r": a "\n" starting this one belongs to that line end. */
  #afterCR = false;

  push(piece: string): string[] {
    let text = piece;
    if (this.#afterCR && text.charCodeAt(0) === 0x0a) text = text.slice(1);
    this.#afterCR = false;
    text = this.#rest + text;
    const lines: string[] = [];
    // Most providers end lines with "\n" alone: the "\r" search is skipped for a piece without one.
    const hasCR = text.includes('\r');
    let start = 0;
    for (;;) {
      const lf = text.indexOf('\n', start);
      const cr = hasCR ? text.indexOf('\r', start) : -1;
      const end = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf);
      if (end === -1) break;
      lines.push(text.slice(start, end));
      if (end === cr && text.charCodeAt(end + 1) === 0x0a) start = end + 2;
      else {
        start = end + 1;
        if (end === cr && end === text.length - 1) this.#afterCR = true;
      }
    }
    this.#rest = text.slice(start);
    return lines;
  }
}
