// Urgent notifications that repeat until acknowledged (docs/protocol.md "Urgent until
// acknowledged"), while the app is open: each alerts again every `repeat` seconds (a tone, a
// vibration and its notification, which has an Acknowledge action) until Acknowledge is tapped,
// here or on the notification, an `urgent_stop` says it was acknowledged elsewhere or cancelled by
// its sender, or `expire_at` passes. The alert is an inbox entry (items.js: only a server-sealed
// payload makes one, its repeat and expiry held to the server's bounds), so a reloaded page goes
// on; while the app is closed the server pushes it again and the service worker shows it (sw.js).
//
// Stopping never fails half-way: the repeat and the sound stop first, then what is kept changes,
// then the notification closes, each on its own, so no error leaves an alarm looping.
import { sound, stop as silence } from "/app/alarm.js";
import "/app/answer.js";
import "/app/items.js";
import { closeOs } from "/app/note_view.js";
import "/app/store.js";
import { button, element } from "/app/ui.js";

const store = globalThis.relayboxStore;
const items = globalThis.relayboxItems;
const alerts = new Map(); // by receipt: {entry, count, timer}
const ALARM_S = 2; // each alert's tone and vibration
const SETTLED_S = 86_400; // a stop is remembered this long: longer than any alert repeats
const STOPPED = {
  mine: "You acknowledged it.",
  acknowledged: "Acknowledged.",
  cancelled: "Cancelled by the sender.",
  expired: "Expired without an acknowledgement.",
};

function statusText(alert) {
  const times = alert.count <= 1 ? "once" : `${alert.count} times`;
  return `Alerted ${times}; again every ${alert.entry.payload.repeat} s until you acknowledge it.`;
}

/** The parts of an urgent alert's entry: its message, how often it alerted, Acknowledge. */
export function urgentParts(entry, changed) {
  const receipt = entry.payload.receipt;
  const message = element("p", "note-text", entry.payload.message);
  if (entry.state !== "alerting") return [message, element("p", "closed-line", STOPPED[entry.state] || "Stopped.")];
  const status = element("p", "alert-status");
  status.dataset.receipt = receipt;
  const alert = alerts.get(receipt);
  status.textContent = alert ? statusText(alert) : "Alerting…";
  const ack = button("Acknowledge", () => acknowledge(receipt, changed), "button primary");
  return [message, status, ack];
}

/** Alert for every alerting entry not alerting yet (a new one, or one a reload interrupted), and
 * stop the timers of those that stopped. */
export async function followAlerts(entries, changed) {
  const alerting = new Map(entries.filter((e) => e.kind === "urgent" && e.state === "alerting").map((e) => [e.payload.receipt, e]));
  for (const [receipt, alert] of alerts) {
    if (!alerting.has(receipt)) halt(receipt, alert);
  }
  const identity = alerting.size ? await store.load() : null;
  for (const [receipt, entry] of alerting) {
    if (alerts.has(receipt)) continue;
    if (((identity && identity.settledUrgent) || {})[receipt]) {
      await settle(receipt, "acknowledged", changed); // a replay of one that stopped
      continue;
    }
    const alert = { entry, count: 0, timer: null };
    alerts.set(receipt, alert);
    ring(alert, changed);
  }
}

function ring(alert, changed) {
  const { payload } = alert.entry;
  const left = payload.expire_at * 1000 - Date.now();
  if (left <= 0) {
    settle(payload.receipt, "expired", changed);
    return;
  }
  alert.count += 1;
  const shown = document.querySelector(`.alert-status[data-receipt="${payload.receipt}"]`);
  if (shown) shown.textContent = statusText(alert);
  alert.timer = setTimeout(() => ring(alert, changed), Math.min(payload.repeat * 1000, left));
  sound(Math.min(ALARM_S, payload.repeat));
  notifyAlert(payload).catch(() => {}); // the page shows it regardless
}

async function notifyAlert(payload) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  const registration = await navigator.serviceWorker.ready;
  await registration.showNotification(`Urgent: ${payload.title || "relaybox"}`, {
    body: payload.message,
    tag: items.appKey("urgent", payload.receipt),
    renotify: true,
    requireInteraction: true,
    actions: [{ action: "ack", title: "Acknowledge" }],
    data: { url: "/app/", receipt: payload.receipt },
  });
}

async function acknowledge(receipt, changed) {
  const outcome = await globalThis.relayboxAcknowledge(receipt);
  const body = outcome.body || {};
  if (outcome.status !== 200) throw new Error((body.error && body.error.message) || `The server answered ${outcome.status}.`);
  const identity = await store.load();
  const by = body.acknowledged_by;
  const mine = body.status === "acknowledged" && by && by.device_id === identity.deviceId;
  await settle(receipt, mine ? "mine" : body.status || "acknowledged", changed);
}

function halt(receipt, alert) {
  clearTimeout(alert.timer);
  alerts.delete(receipt);
  silence();
}

/** Stop an alert: acknowledged ("mine": here), cancelled or expired. */
export async function settle(receipt, reason, changed) {
  const alert = alerts.get(receipt);
  if (alert) halt(receipt, alert);
  const steps = [
    () => store.take([items.stopUrgent(receipt, reason)]),
    () =>
      store.update((identity) => {
        const now = Date.now() / 1000;
        const settledUrgent = Object.fromEntries(Object.entries(identity.settledUrgent || {}).filter(([, until]) => until > now));
        settledUrgent[receipt] = now + SETTLED_S;
        return { settledUrgent };
      }),
    () => closeOs(items.appKey("urgent", receipt)),
    () => changed(),
  ];
  for (const step of steps) {
    try {
      await step();
    } catch {
      // Each step on its own: the alarm is stopped whatever fails after it.
    }
  }
}
