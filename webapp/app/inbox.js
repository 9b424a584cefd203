// The inbox view of the web phone: every entry it keeps (store.js, items.js), newest first, each
// a card with what it is, its time, its priority and tags, and a Dismiss button; what still needs
// the person (open questions, alerting urgent alerts, the ring while it rings) pinned on top under
// "Needs you"; a placeholder when it is empty; Clear all (open questions and alerts stay).
// Redrawn from IndexedDB after every change; a card whose entry did not change is kept as it is
// (a half-typed reply, the focus), so only what changed is built again.
import { attachmentView } from "/app/attachments.js";
import "/app/items.js";
import { closeOs, noteContent } from "/app/note_view.js";
import "/app/notes.js";
import { stopRing } from "/app/phone_ops.js";
import { expired, questionParts } from "/app/questions.js";
import "/app/store.js";
import { $, button, element, timeElement } from "/app/ui.js";
import { followAlerts, urgentParts } from "/app/urgent.js";

const store = globalThis.relayboxStore;
const items = globalThis.relayboxItems;
const notes = globalThis.relayboxNotes;
const KINDS = { question: "Question", urgent: "Urgent", reminder: "Reminder", ring: "Ring", document: "Document" };
const PRIORITY = { high: "High priority", urgent: "Urgent", low: "Low priority", min: "Lowest priority" };
const built = new Map(); // key → {signature, card}
let context = null; // {identity, changed}
let expiry = null;

/** Start drawing the inbox of `identity`; `changed()` is what redraws it (after a change). */
export function initInbox(identity, changed) {
  context = { identity, changed };
  $("clear-all").addEventListener("click", () => $("clear-dialog").showModal());
  $("clear-dialog").addEventListener("close", async () => {
    if ($("clear-dialog").returnValue !== "clear") return;
    const entries = await store.entries();
    await store.remove(entries.filter((entry) => !isWaiting(entry)).map((entry) => entry.key));
    await changed();
  });
}

function isWaiting(entry) {
  if (entry.kind === "question") return entry.state === "open" && !expired(entry);
  if (entry.kind === "urgent") return entry.state === "alerting";
  return entry.kind === "ring" && entry.state === "ringing";
}

/** Draw `entries` (newest first). */
export async function drawInbox(entries) {
  const emoji = await notes.emojiTable();
  const pinned = [];
  const rest = [];
  entries.forEach((entry) => (isWaiting(entry) ? pinned : rest).push(entry));
  place($("pinned"), pinned.map((entry) => card(entry, emoji)));
  place($("inbox"), rest.map((entry) => card(entry, emoji)));
  const live = new Set(entries.map((entry) => entry.key));
  [...built.keys()].filter((key) => !live.has(key)).forEach((key) => built.delete(key));
  $("pinned-box").hidden = pinned.length === 0;
  $("inbox-empty").hidden = entries.length > 0;
  $("clear-all").hidden = rest.length === 0;
  $("inbox-count").hidden = pinned.length === 0;
  $("inbox-count").textContent = String(pinned.length);
  $("inbox-count-words").hidden = pinned.length === 0;
  await followAlerts(entries, context.changed);
  watchExpiry(pinned);
  const lapsed = entries.filter((entry) => entry.kind === "question" && expired(entry));
  if (lapsed.length) await store.take(lapsed.map((entry) => items.closeQuestion(entry.payload.id, { state: "expired" })));
}

/** Put `cards` into `list` in this order, moving only what is out of place. */
function place(list, cards) {
  cards.forEach((made, index) => {
    if (list.children[index] !== made) list.insertBefore(made, list.children[index] || null);
  });
  while (list.children.length > cards.length) list.lastElementChild.remove();
}

/** Redraw when the soonest open question expires. */
function watchExpiry(pinned) {
  clearTimeout(expiry);
  const due = pinned.filter((entry) => entry.kind === "question").map((entry) => entry.payload.expires_at * 1000);
  if (due.length) expiry = setTimeout(() => context.changed(), Math.max(0, Math.min(...due) - Date.now()) + 250);
}

function card(entry, emoji) {
  const signature = JSON.stringify([entry.at, entry.state, entry.by, entry.choice, entry.payload, isWaiting(entry)]);
  const known = built.get(entry.key);
  if (known && known.signature === signature) return known.card;
  const made = build(entry, emoji);
  built.set(entry.key, { signature, card: made });
  return made;
}

function build(entry, emoji) {
  const li = element("li", `entry kind-${entry.kind}`);
  li.dataset.key = entry.key;
  if (entry.kind === "notification") li.dataset.sequence = entry.key.slice(2);
  const { title, parts } = content(entry, emoji);
  const head = element("div", "entry-head");
  const heading = element("div", "entry-heading");
  const label = KINDS[entry.kind];
  if (label) heading.append(element("span", "entry-kind", label));
  if (title) heading.append(element("strong", "note-title", title));
  head.append(heading, timeElement(entry.at));
  if (!isWaiting(entry)) head.append(dismiss(entry, title || label || "notification"));
  li.append(head);
  const priority = PRIORITY[entry.payload.priority];
  if (priority && entry.kind !== "urgent") {
    const badges = element("p", "entry-badges");
    badges.append(element("span", `badge priority-${entry.payload.priority}`, priority));
    li.append(badges);
    li.classList.add(`priority-${entry.payload.priority}`);
  }
  li.append(...parts);
  return li;
}

function dismiss(entry, name) {
  const made = button("×", async () => {
    await store.remove([entry.key]);
    if (entry.kind === "notification") await closeOs(entry.key).catch(() => {});
    await context.changed();
  }, "dismiss");
  made.setAttribute("aria-label", `Dismiss ${name}`);
  return made;
}

/** {title, parts} of an entry by its kind. */
function content(entry, emoji) {
  const { identity, changed } = context;
  const { payload } = entry;
  if (entry.kind === "notification") {
    const shown = noteContent(payload, emoji);
    if (payload.attachment) shown.parts.push(attachmentView(identity, payload.attachment));
    return shown;
  }
  if (entry.kind === "urgent") return { title: payload.title || null, parts: urgentParts(entry, changed) };
  if (entry.kind === "question") return { title: null, parts: questionParts(identity, entry, changed) };
  if (entry.kind === "reminder") return { title: null, parts: reminderParts(entry) };
  if (entry.kind === "ring") return { title: null, parts: ringParts(entry) };
  if (entry.kind === "document") return { title: payload.filename, parts: documentParts(payload) };
  return { title: null, parts: [element("p", "", `A ${payload.type} arrived.`)] };
}

function reminderParts(entry) {
  const { payload } = entry;
  const at = new Date(payload.fire_at * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  const lines = {
    set: `Set for ${at}: ${payload.message}`,
    fired: `Reminder: ${payload.message}`,
    cancelled: `Cancelled: ${payload.message}`,
  };
  return [element("p", "note-text", lines[entry.state] || payload.message)];
}

function ringParts(entry) {
  const seconds = entry.payload.seconds;
  if (entry.state !== "ringing") {
    const how = entry.state === "stopped" ? "you stopped it" : `for ${seconds} s`;
    return [element("p", "note-text", `Someone rang this phone (${how}).`)];
  }
  const stop = button("Stop ringing", async () => {
    await stopRing();
    await context.changed();
  }, "button primary");
  return [element("p", "note-text", `Ringing for ${seconds} s: someone is looking for this phone.`), stop];
}

function documentParts(payload) {
  const link = element("a", "button small", `Download ${payload.filename}`);
  link.href = URL.createObjectURL(new Blob([payload.content], { type: "text/plain;charset=utf-8" }));
  link.download = payload.filename;
  return [element("p", "note-text", `A text document (${notes.size(new Blob([payload.content]).size)}) for your Downloads.`), link];
}
