// Urgent notifications that repeat until acknowledged (docs/protocol.md "Urgent until
// acknowledged"), while the app is open: each alerts again every `repeat` seconds (a tone, a
// vibration and its notification, which has an Acknowledge action) until Acknowledge is tapped,
// here or on the notification, an `urgent_stop` says it was acknowledged elsewhere or cancelled by
// its sender, or `expire_at` passes. Alerts are kept in IndexedDB, so a reloaded page goes on;
// while the app is closed the server pushes the notification again and the service worker shows
// it (sw.js).
import { sound } from "/app/alarm.js";
import "/app/answer.js";
import "/app/store.js";

const store = globalThis.relayboxStore;
const alerts = new Map(); // by receipt: {payload, entry, status, button, count, timer}
const ALARM_S = 2; // each alert's tone and vibration
const STOPPED = {
  mine: "You acknowledged it.",
  acknowledged: "Acknowledged.",
  cancelled: "Cancelled by the sender.",
  expired: "Expired without an acknowledgement.",
};

/** An urgent notification with a receipt: shown with its Acknowledge button, alerting at once. */
export async function urgent(payload, ui) {
  if (alerts.has(payload.receipt) || payload.expire_at * 1000 <= Date.now()) return;
  alerts.set(payload.receipt, null); // taken: a copy arriving meanwhile (a stream replay) is dropped
  const identity = await store.load();
  if ((identity.settledUrgent || {})[payload.receipt]) { // a replay of one that stopped
    alerts.delete(payload.receipt);
    return;
  }
  await store.update({ urgentAlerts: { ...(identity.urgentAlerts || {}), [payload.receipt]: payload } });
  if (alerts.has(payload.receipt)) show(payload, ui); // unless its stop came meanwhile
}

/** Go on with the alerts a reload interrupted. */
export function resumeUrgent(identity, ui) {
  Object.values(identity.urgentAlerts || {}).forEach((payload) => show(payload, ui));
}

function show(payload, ui) {
  document.getElementById("urgent-card").hidden = false;
  const status = Object.assign(document.createElement("p"), { className: "muted" });
  const button = ui.button("Acknowledge", () => acknowledge(payload.receipt, ui));
  button.classList.replace("small", "primary");
  const text = payload.title ? `${payload.title}: ${payload.message}` : payload.message;
  const entry = ui.entry("urgent", text, [status, button]);
  entry.classList.add("urgent-alert");
  const alert = { payload, entry, status, button, count: 0, timer: null };
  alerts.set(payload.receipt, alert);
  ring(alert, ui);
}

function ring(alert, ui) {
  const { payload } = alert;
  const left = payload.expire_at * 1000 - Date.now();
  if (left <= 0) return stopUrgent(payload.receipt, "expired", ui);
  alert.count += 1;
  const times = alert.count === 1 ? "once" : `${alert.count} times`;
  alert.status.textContent = `Alerted ${times}; again every ${payload.repeat} s until you acknowledge it.`;
  sound(Math.min(ALARM_S, payload.repeat));
  const title = `Urgent: ${payload.title || "relaybox"}`;
  ui.notify({ title, message: payload.message, id: payload.receipt, urgent: true, receipt: payload.receipt });
  alert.timer = setTimeout(() => ring(alert, ui), Math.min(payload.repeat * 1000, left));
  return undefined;
}

async function acknowledge(receipt, ui) {
  const alert = alerts.get(receipt);
  if (alert) alert.button.disabled = true;
  let outcome;
  try {
    outcome = await globalThis.relayboxAcknowledge(receipt);
  } finally {
    if (alert) alert.button.disabled = false;
  }
  if (outcome.status !== 200) throw new Error(outcome.body?.error?.message || "The server refused it.");
  const identity = await store.load();
  const by = outcome.body.acknowledged_by;
  const mine = outcome.body.status === "acknowledged" && by && by.device_id === identity.deviceId;
  await stopUrgent(receipt, mine ? "mine" : outcome.body.status, ui);
  // The server's urgent_stop reaches this phone too, and may have stopped the alert first.
  if (alert && mine) alert.status.textContent = STOPPED.mine;
}

/** Stop an alert: acknowledged ("mine": here), cancelled or expired. Unknown receipts are kept as
 * settled too, in case their notification comes after the stop. */
export async function stopUrgent(receipt, reason, ui) {
  const alert = alerts.get(receipt);
  alerts.delete(receipt);
  if (alert) {
    clearTimeout(alert.timer);
    alert.button.remove();
    alert.status.textContent = STOPPED[reason] || "Stopped.";
    alert.entry.classList.add("settled");
  }
  if ("serviceWorker" in navigator) {
    const registration = await navigator.serviceWorker.ready;
    (await registration.getNotifications({ tag: receipt })).forEach((shown) => shown.close());
  }
  const identity = await store.load();
  const urgentAlerts = { ...(identity.urgentAlerts || {}) };
  delete urgentAlerts[receipt];
  const now = Date.now() / 1000;
  const settledUrgent = Object.fromEntries(
    Object.entries(identity.settledUrgent || {}).filter(([, until]) => until > now),
  );
  settledUrgent[receipt] = now + 86400; // a day: longer than any urgent notification repeats
  await store.update({ urgentAlerts, settledUrgent });
}
