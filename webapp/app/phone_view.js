// The browser as the person's phone: its views (the inbox first; Pair, Tokens, Assistants and
// Settings each on their own, chosen from the tab bar and kept in the address's #fragment, so Back
// works), and what it does with each frame of its stream: the payload becomes inbox entries
// (items.js) written with the frame's position in one transaction (store.js), then the inbox is
// drawn again, the page's own notification shown, and an operation done (ring, reminder, document).
import "/app/items.js";
import { drawInbox, initInbox } from "/app/inbox.js";
import { closeOs, notifyOs } from "/app/note_view.js";
import "/app/notes.js";
import { openFrame, reportBuild, WEB_APP_BUILD } from "/app/phone.js";
import { cancel, pullDocument, pushPayload, remember, ring, schedule } from "/app/phone_ops.js";
import { drawSound, drawTokens, initViews } from "/app/settings.js";
import "/app/store.js";
import { follow } from "/app/stream.js";
import { $, guarded, problem } from "/app/ui.js";
import { settle } from "/app/urgent.js";

const store = globalThis.relayboxStore;
const items = globalThis.relayboxItems;
const notes = globalThis.relayboxNotes;
const VIEWS = ["inbox", "pair", "tokens", "assistants", "settings"];
const PRUNE_EVERY = 50; // frames taken in between two prunes of the inbox to its bound
let drawing = Promise.resolve();
let taken = 0;

/** Draw the inbox again from IndexedDB (one drawing at a time, in order). */
function changed() {
  drawing = drawing.then(() => store.entries().then(drawInbox)).catch(problem);
  return drawing;
}

/** A notification of the page's own (a question, the ring, a reminder) while it is open. */
function notify({ title, message, tag, urgent }) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  navigator.serviceWorker.ready
    .then((registration) =>
      registration.showNotification(title, { body: message, tag, requireInteraction: Boolean(urgent), data: { url: "/app/" } }),
    )
    .catch(problem);
}

/** The payload a frame carries, opened: {payload, from}, or null for one that carries none. */
async function payloadOf(identity, frame) {
  if (frame.event === "envelope") {
    const payload = openFrame(identity, frame.data);
    return { payload, from: frame.data.from };
  }
  if (frame.event === "push") return { payload: pushPayload(identity, frame.data), from: "server" };
  if (frame.event === "token_update") return { payload: { type: "token_update" }, from: "server" };
  return null;
}

async function onFrame(identity, frame) {
  const got = await payloadOf(identity, frame);
  let changes = [];
  let after = null;
  if (got) {
    let { payload } = got;
    const { from } = got;
    if (payload.type === "document") {
      payload = await pullDocument(identity, payload.documentId ?? payload.document_id);
      const key = items.appKey("document", payload.document_id);
      const entry = { key, kind: "document", at: Date.now(), payload, from };
      changes = [{ key, apply: () => entry }];
    } else {
      changes = items.changesFor(payload, from);
    }
    after = () => act(identity, payload, from);
  }
  await store.take(changes, frame.seq);
  if (++taken % PRUNE_EVERY === 0) await store.prune();
  if (changes.length) await changed();
  if (after) await after();
}

/** What a payload does besides its entry. */
async function act(identity, payload, from) {
  const type = payload.type;
  if (type === "notification" && !items.urgency(payload, from)) {
    await notifyOs(payload, await notes.emojiTable());
  } else if (type === "notification_clear") {
    await closeOs(items.senderKey({ sequence_id: payload.sequence_id }));
  } else if (type === "interaction_request") {
    notify({ title: "Question", message: payload.question, tag: items.appKey("question", payload.id), urgent: true });
  } else if (type === "interaction_closed") {
    await closeOs(items.appKey("question", payload.id)).catch(() => {});
  } else if (type === "urgent_stop") {
    await settle(payload.receipt, payload.reason, changed);
  } else if (type === "reminder") {
    await remember(payload, notify, changed);
  } else if (type === "reminder_cancel") {
    await cancel(payload.reminder_id);
  } else if (type === "ring") {
    ring(Math.min(Math.max(Number(payload.durationS) || 60, 1), 300), notify, changed);
  } else if (type === "token_update") {
    await drawTokens(identity);
  }
}

function route(opened) {
  const view = VIEWS.includes(location.hash.slice(1)) ? location.hash.slice(1) : "inbox";
  VIEWS.forEach((name) => ($(`view-${name}`).hidden = name !== view));
  document.querySelectorAll(".tabbar a").forEach((tab) => {
    if (tab.dataset.tab === view) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  });
  return view;
}

export async function showPhone(identity) {
  $("setup").hidden = true;
  $("phone").hidden = false;
  $("app-state").hidden = false;
  $("phone-name").textContent = identity.name;
  initInbox(identity, changed);
  const opened = initViews(identity, WEB_APP_BUILD);
  const show = guarded(async (moved) => {
    const view = route();
    if (moved) $(`${view === "inbox" ? "inbox" : view === "assistants" ? "grants" : view}-title`).focus();
    await opened(view);
  });
  window.addEventListener("hashchange", () => show(true));
  ["pointerdown", "keydown"].forEach((kind) => window.addEventListener(kind, () => setTimeout(drawSound, 0)));
  await Promise.all([show(false), changed(), reportBuild(identity)]);
  Object.values(identity.reminders || {}).forEach((reminder) => schedule(reminder, notify, changed));
  store.prune().catch(problem);
  follow({
    token: identity.token,
    since: identity.lastSeq || 0,
    onFrame: (frame) => onFrame(identity, frame).catch(problem),
    onState: (state) => {
      $("stream-state").textContent = state;
      $("stream-state").dataset.state = state;
    },
  });
}
