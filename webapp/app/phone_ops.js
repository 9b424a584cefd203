// What the web phone does with the operations sent to it while the app is open, beside keeping
// them in its inbox (items.js): the ring (a loud tone and vibration for its duration, with Stop),
// reminders armed in IndexedDB and fired as notifications at their time, and documents opened
// with this browser's key (their text is kept with their entry: the server deletes a document
// once it is pulled).
import { sound, stop as silence } from "/app/alarm.js";
import { call } from "/app/api.js";
import "/app/items.js";
import { closeOs } from "/app/note_view.js";
import "/app/store.js";
import { fromBase64, fromUtf8, openEnvelope } from "/static/relaybox-wire.js";

const store = globalThis.relayboxStore;
const items = globalThis.relayboxItems;
const timers = new Map(); // reminder id → timer
let ringing = null; // {timer}

export function opened(identity, base64Envelope) {
  return JSON.parse(fromUtf8(openEnvelope(fromBase64(base64Envelope), identity.secretKey, identity.serverPublicKey)));
}

/** A push frame's payload ({type, ...fields, payload?}): its inline envelope if it has one. */
export function pushPayload(identity, data) {
  return data.payload ? opened(identity, data.payload) : data;
}

/** A document: pulled and opened now, as a payload its entry keeps ({type, document_id, filename, content}). */
export async function pullDocument(identity, documentId) {
  const pulled = await call("GET", `/v1/documents/${encodeURIComponent(documentId)}`, { token: identity.token });
  const doc = opened(identity, pulled.blob);
  if (doc.type !== "document" || doc.document_id !== documentId) throw new Error("the envelope holds no such document");
  return doc;
}

/** Ring now for `seconds` (a tone, a vibration and a notification); `changed` redraws the inbox
 * when it ends by itself. */
export function ring(seconds, notify, changed) {
  stopRing(false);
  sound(seconds);
  notify({ title: "Ring", message: "Someone is looking for this phone.", tag: items.appKey("ring"), urgent: true });
  ringing = { timer: setTimeout(() => finishRing(changed), seconds * 1000) };
}

async function finishRing(changed) {
  ringing = null;
  await store.take([items.patch(items.appKey("ring"), () => ({ state: "done" }))]);
  await changed();
}

/** Stop the ring: tone, vibration, its notification; its entry says it was stopped. */
export async function stopRing(keep = true) {
  if (ringing) clearTimeout(ringing.timer);
  ringing = null;
  silence();
  if (!keep) return;
  await store.take([items.patch(items.appKey("ring"), () => ({ state: "stopped" }))]);
  try {
    await closeOs(items.appKey("ring"));
  } catch {
    // Its notification may be gone already.
  }
}

/** A reminder set: kept with the identity and armed, unless its cancel came first. */
export async function remember(reminder, notify, changed) {
  let armed = false;
  await store.update((identity) => {
    if ((identity.cancelledReminders || {})[reminder.reminder_id]) return {};
    armed = true;
    return { reminders: { ...(identity.reminders || {}), [reminder.reminder_id]: reminder } };
  });
  if (armed) schedule(reminder, notify, changed);
}

export async function cancel(reminderId) {
  clearTimeout(timers.get(reminderId));
  timers.delete(reminderId);
  // Remembered for a day, in case the cancel overtook its reminder.
  await store.update((identity) => {
    const reminders = { ...(identity.reminders || {}) };
    delete reminders[reminderId];
    const cancelledReminders = { ...(identity.cancelledReminders || {}), [reminderId]: Date.now() / 1000 + 86400 };
    return { reminders, cancelledReminders };
  });
}

/** Arm a reminder on this page; one already due fires now. */
export function schedule(reminder, notify, changed) {
  clearTimeout(timers.get(reminder.reminder_id));
  const delay = Math.max(0, reminder.fire_at * 1000 - Date.now());
  timers.set(reminder.reminder_id, setTimeout(() => fire(reminder, notify, changed), Math.min(delay, 2 ** 31 - 1)));
}

async function fire(reminder, notify, changed) {
  if (reminder.fire_at * 1000 > Date.now()) return schedule(reminder, notify, changed); // a long wait, in steps
  let due = false;
  await store.update((identity) => {
    const reminders = { ...(identity.reminders || {}) };
    due = Boolean(reminders[reminder.reminder_id]);
    delete reminders[reminder.reminder_id];
    return { reminders };
  });
  if (!due) return undefined;
  const key = items.appKey("reminder", reminder.reminder_id);
  await store.take([
    {
      key,
      apply: (known) => ({ ...(known || { key, kind: "reminder", payload: reminder, from: "server" }), state: "fired", at: Date.now() }),
    },
  ]);
  notify({ title: "Reminder", message: reminder.message, tag: key, urgent: true });
  return changed();
}
