// Follows GET /v1/sync while the page is open (EventSource cannot send a credential, so this reads
// the event stream with fetch). Each frame is handed over as {seq, event, data}; after a drop it
// reconnects from the last seq it saw (Last-Event-ID), waiting longer each time up to 30 s; a 401
// (the credential was revoked) ends it.

const MAX_DELAY_MS = 30_000;

export function follow({ token, since = 0, onFrame, onState = () => {} }) {
  let stopped = false;
  let last = since;
  let controller = null;
  let delay = 1000;

  async function connectOnce() {
    controller = new AbortController();
    const headers = { Authorization: `Bearer ${token}`, Accept: "text/event-stream" };
    if (last > 0) headers["Last-Event-ID"] = String(last);
    const response = await fetch("/v1/sync", { headers, signal: controller.signal });
    if (response.status === 401) {
      stopped = true;
      onState("revoked");
      return;
    }
    if (!response.ok || !response.body) throw new Error(`stream answered ${response.status}`);
    onState("connected");
    delay = 1000;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = parse(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (frame === null) continue;
        if (frame.seq > last) last = frame.seq;
        await onFrame(frame);
      }
    }
  }

  async function run() {
    while (!stopped) {
      try {
        await connectOnce();
      } catch (error) {
        if (stopped) return;
      }
      if (stopped) return;
      onState("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }

  run();
  return {
    stop() {
      stopped = true;
      if (controller) controller.abort();
    },
    get last() {
      return last;
    },
  };
}

/** One server-sent event block: {seq, event, data}, or null for a comment (keep-alive). */
export function parse(block) {
  let seq = 0;
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":") || line === "") continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "id") seq = Number(value) || 0;
    else if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (data.length === 0) return null;
  return { seq, event, data: JSON.parse(data.join("\n")) };
}
