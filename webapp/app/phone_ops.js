// What the web phone does with the operations sent to it while the app is open: questions answered
// by tapping a choice and, where allowed, typing a reply (first answer wins, on any device), the
// ring (a loud tone and vibration for its duration, and a notification), reminders kept in
// IndexedDB and fired as notifications at their time, documents opened with this browser's key
// and offered as a download, and the stop of an urgent notification (urgent.js repeats it).
import "/app/answer.js";
import { sound } from "/app/alarm.js";
import { ApiError, call } from "/app/api.js";
import "/app/store.js";
import { stopUrgent } from "/app/urgent.js";
import { fromBase64, fromUtf8, openEnvelope } from "/static/relaybox-wire.js";

const store = globalThis.relayboxStore;
const timers = new Map();

function opened(identity, base64Envelope) {
  return JSON.parse(fromUtf8(openEnvelope(fromBase64(base64Envelope), identity.secretKey, identity.serverPublicKey)));
}

/**
 * A question with one button per choice; the answer goes to whoever asked. When the question takes
 * a typed reply (`text_max_chars`), a text box under the buttons goes with the tapped choice, or,
 * with no choices, is the answer itself, sent with its own button.
 */
export function question(identity, payload, ui) {
  const reply = Number.isInteger(payload.text_max_chars) ? replyBox(payload) : null;
  const controls = [];
  const answer = async (index, label) => {
    const text = reply ? reply.field.value.trim() : "";
    if (index === null && !text) {
      ui.status(entry, "Type a reply first.");
      return;
    }
    controls.forEach((each) => (each.disabled = true));
    try {
      const body = globalThis.relayboxAnswerBody(identity, payload.id, index, text);
      await call("POST", `/v1/interactions/${encodeURIComponent(payload.id)}/answer`, { token: identity.token, body });
      ui.status(entry, text ? `Answered${label ? `: ${label},` : ""} with your reply.` : `Answered: ${label}`);
    } catch (error) {
      const gone = error instanceof ApiError && error.status === 409;
      ui.status(entry, gone ? "Already answered or expired." : error.message);
      if (!gone) controls.forEach((each) => (each.disabled = false));
    }
  };
  const buttons = payload.choices.map((choice, index) => ui.button(choice, () => answer(index, choice)));
  controls.push(...buttons);
  if (reply && !payload.choices.length) {
    const send = ui.button("Send reply", () => answer(null, null));
    reply.box.append(send);
    controls.push(send);
  }
  if (reply) controls.push(reply.field);
  const entry = ui.entry("questions", payload.question, reply ? [...buttons, reply.box] : buttons);
  ui.notify({ title: "Question", message: payload.question, id: payload.id });
}

/** A labelled text box for a typed reply of at most `text_max_chars` characters. */
function replyBox(payload) {
  const field = Object.assign(document.createElement("textarea"), {
    id: `reply-${payload.id}`,
    maxLength: payload.text_max_chars,
    rows: 2,
  });
  const label = Object.assign(document.createElement("label"), {
    htmlFor: field.id,
    textContent: payload.choices.length ? "Add a reply (optional)" : "Your reply",
  });
  const box = Object.assign(document.createElement("div"), { className: "app-form reply" });
  box.append(label, field);
  return { field, box };
}

/** A push frame ({type, ...fields, payload?}): its inline envelope if it has one, else its fields. */
export function push(identity, data, ui) {
  return operation(identity, data.payload ? opened(identity, data.payload) : data, ui);
}

/**
 * An operation for the phone, from an envelope or a push: reminder, reminder_cancel, ring,
 * document, urgent_stop. Returns false for anything else.
 */
export async function operation(identity, payload, ui) {
  if (payload.type === "urgent_stop") await stopUrgent(payload.receipt, payload.reason, ui);
  else if (payload.type === "reminder") await remember(payload, ui);
  else if (payload.type === "reminder_cancel") await cancel(payload.reminder_id, ui);
  else if (payload.type === "ring") ring(Number(payload.durationS) || 60, ui);
  else if (payload.type === "document") await document_(identity, payload.documentId ?? payload.document_id, ui);
  else return false;
  return true;
}

function ring(seconds, ui) {
  ui.entry("inbox", `Ringing for ${seconds} s`);
  ui.notify({ title: "Ring", message: "Someone is looking for this phone.", id: "ring", urgent: true });
  sound(seconds);
}

async function document_(identity, documentId, ui) {
  const pulled = await call("GET", `/v1/documents/${encodeURIComponent(documentId)}`, { token: identity.token });
  const doc = opened(identity, pulled.blob);
  if (doc.type !== "document" || doc.document_id !== documentId) throw new Error("the envelope holds no such document");
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([doc.content], { type: "text/plain;charset=utf-8" }));
  link.download = doc.filename;
  link.textContent = `Download ${doc.filename}`;
  ui.entry("inbox", `Document ${doc.filename} received.`, [link]);
}

async function remember(reminder, ui) {
  const identity = await store.load();
  if ((identity.cancelledReminders || {})[reminder.reminder_id]) return; // its cancel came first
  const reminders = { ...(identity.reminders || {}), [reminder.reminder_id]: reminder };
  await store.update({ reminders });
  schedule(reminder, ui);
}

async function cancel(reminderId, ui) {
  const identity = await store.load();
  const reminders = { ...(identity.reminders || {}) };
  const known = reminders[reminderId];
  delete reminders[reminderId];
  clearTimeout(timers.get(reminderId));
  timers.delete(reminderId);
  // Remembered for a day, in case the cancel overtook its reminder.
  const cancelledReminders = { ...(identity.cancelledReminders || {}), [reminderId]: Date.now() / 1000 + 86400 };
  await store.update({ reminders, cancelledReminders });
  if (known) ui.entry("inbox", `Reminder cancelled: ${known.message}`);
}

/** Arm a reminder on this page; one already due fires now. */
export function schedule(reminder, ui) {
  clearTimeout(timers.get(reminder.reminder_id));
  const delay = Math.max(0, reminder.fire_at * 1000 - Date.now());
  timers.set(reminder.reminder_id, setTimeout(() => fire(reminder, ui), Math.min(delay, 2 ** 31 - 1)));
}

async function fire(reminder, ui) {
  if (reminder.fire_at * 1000 > Date.now()) return schedule(reminder, ui); // a long wait, in steps
  const identity = await store.load();
  const reminders = { ...(identity.reminders || {}) };
  if (!reminders[reminder.reminder_id]) return;
  delete reminders[reminder.reminder_id];
  await store.update({ reminders });
  ui.entry("inbox", `Reminder: ${reminder.message}`);
  ui.notify({ title: "Reminder", message: reminder.message, id: reminder.reminder_id, urgent: true });
}
