/*
 * The relaybox web app's service worker: a classic worker (what every browser with web push runs,
 * Safari 16.4+ included), registered at /app/sw.js with the scope /app/. A push carries the
 * server's push message as JSON (docs/protocol.md "Delivery"); a notification's envelope comes
 * inline as `payload`, and so do a reminder the server pushes at its time and the repeats of an
 * urgent notification, and is opened here with the key this browser keeps in IndexedDB, so the
 * text exists in clear only on this device. A bare wake-up ("notify") says there is something to
 * read and opens the app when tapped.
 *
 * A notification of a sequence already shown replaces it (the same tag: items.js keeps senders'
 * tags and the app's own apart). What a push carries is also written into the inbox the app shows
 * (store.js, items.js), so the app opened later lists it even when the server's queue no longer
 * holds it; the app's stream position is left alone (the app still reads every queued message,
 * and finds its entry there). An http button's request is sent from here, when tapped in the
 * notification or in the open app (which asks by message): this worker's policy alone lets it
 * connect to other origins (webapp/assets.py).
 */
importScripts(
  "/static/vendor/tweetnacl-1.0.3/nacl-fast.js",
  "/static/relaybox-wire-codec.js",
  "/static/relaybox-wire-nacl.js",
  "/app/store.js",
  "/app/answer.js",
  "/app/items.js",
  "/app/notes.js",
);

var wire = self.relayboxWire;
var notes = self.relayboxNotes;
var items = self.relayboxItems;
var store = self.relayboxStore;

self.addEventListener("install", function (event) {
  event.waitUntil(self.skipWaiting());
});

self.addEventListener("activate", function (event) {
  event.waitUntil(self.clients.claim());
});

/**
 * The notification a push message asks for: {title, options}, or {clear: sequence} for a clear (the
 * server pushes none to a browser phone, which finds them in its queue when the app opens; one
 * pushed anyway is applied, showing nothing).
 */
function notificationFor(message, identity, emoji) {
  if (message.payload && identity) {
    try {
      var opened = wire.openEnvelope(wire.fromBase64(message.payload), identity.secretKey, identity.serverPublicKey);
      var note = JSON.parse(wire.fromUtf8(opened));
      if (note.type === "notification") return items.urgency(note, "server") ? urgentShown(note, emoji) : notes.shown(note, emoji);
      if (note.type === "notification_clear") return { clear: "s:" + String(note.sequence_id) };
      if (note.type === "urgent_stop") return stopped(note);
      if (note.type === "reminder") return reminded(note);
      if (note.type === "interaction_request") return asked(note);
      if (note.type === "interaction_closed") return closed(note);
    } catch (error) {
      return { title: "relaybox", options: { body: "A message arrived that this browser could not open.", tag: message.msgId } };
    }
  }
  if (message.type === "ring") return ringing(message);
  return { title: "relaybox", options: { body: "You have a new message. Tap to open relaybox.", tag: message.msgId } };
}

/** The ring while the app is closed: a notification that vibrates and stays until tapped. */
function ringing(message) {
  var seconds = Number(message.durationS) || 60;
  var pattern = [];
  for (var i = 0; i < Math.min(seconds, 30); i++) pattern.push(700, 300);
  return {
    title: "Ring",
    options: {
      body: "Someone is looking for this phone.",
      tag: items.appKey("ring"),
      renotify: true,
      requireInteraction: true,
      vibrate: pattern,
      data: { url: "/app/" },
    },
  };
}

/**
 * A question: its first two choices are action buttons (what browsers show) that answer it here;
 * tapping the notification itself opens the app, where every choice is a button and a question
 * that takes a typed reply has its text box.
 */
function asked(question) {
  var offered = question.choices.length ? " (" + question.choices.join(" / ") + ")" : "";
  var typed = question.text_max_chars ? (question.choices.length ? " Tap to add a reply." : " Tap to reply.") : "";
  return {
    title: "Question",
    options: {
      body: question.question + offered + typed,
      tag: items.appKey("question", question.id),
      requireInteraction: true,
      actions: question.choices.slice(0, 2).map(function (choice, index) {
        return { action: String(index), title: choice };
      }),
      data: { url: "/app/", question: question.id, choices: question.choices },
    },
  };
}

/** After an answer button: say how it went (the first tap on any device wins). */
function answered(data, index, outcome) {
  var body = outcome.status === 200
    ? "Answered: " + data.choices[index]
    : "Already answered or expired.";
  var closing = outcome.status === 200
    ? { state: "answered", choice: index, mine: true }
    : { state: outcome.body && outcome.body.error && outcome.body.error.code === "interaction_expired" ? "expired" : "answered" };
  return store.take([items.closeQuestion(data.question, closing)]).catch(function () {}).then(function () {
    return self.registration.showNotification("Question", { body: body, tag: items.appKey("question", data.question), silent: true });
  });
}

/** A question answered on some device (this one too): its notification says so, quietly. */
function closed(note) {
  var by = note.answered_by && note.answered_by.name ? " on " + note.answered_by.name : "";
  return {
    title: "Question answered",
    options: { body: "Answered" + by + ".", tag: items.appKey("question", note.id), silent: true, data: { url: "/app/" } },
  };
}

/**
 * An urgent notification that repeats until acknowledged (docs/protocol.md "Urgent until
 * acknowledged"): the server pushes it again every `repeat` seconds while it is pending, and each
 * push alerts anew (renotify) with an Acknowledge action. One that expired shows as a plain one.
 */
function urgentShown(note, emoji) {
  var plain = notes.shown(note, emoji);
  var urgent = items.urgency(note, "server"); // held to the server's bounds
  if (urgent.expireAt * 1000 <= Date.now()) return plain;
  var count = Math.max(0, Math.round((Date.now() / 1000 - (Number(note.sent_at) || 0)) / urgent.repeat) || 0);
  var pattern = [];
  for (var i = 0; i < 5; i++) pattern.push(700, 300);
  plain.title = "Urgent: " + plain.title;
  plain.options.body = note.message + (count ? " (alert " + (count + 1) + ")" : "") + " Repeats until acknowledged.";
  plain.options.tag = items.appKey("urgent", urgent.receipt);
  plain.options.renotify = true;
  plain.options.requireInteraction = true;
  plain.options.vibrate = pattern;
  plain.options.actions = [{ action: "ack", title: "Acknowledge" }];
  plain.options.data = { url: "/app/", receipt: urgent.receipt };
  return plain;
}

/** It stopped (acknowledged on some device, or cancelled): the alarm gives way to a quiet note. */
function stopped(stop) {
  var why = stop.reason === "cancelled" ? "Cancelled by the sender." : "Acknowledged.";
  return { title: "Urgent alert stopped", options: { body: why, tag: items.appKey("urgent", stop.receipt), silent: true } };
}

/** After the Acknowledge button: say how it went (the first acknowledgement on any device wins). */
function acknowledged(receipt, outcome) {
  var settled = outcome.body && outcome.body.status;
  var body = outcome.status !== 200
    ? "The acknowledgement did not reach the server; open relaybox to try again."
    : settled === "acknowledged" ? "Acknowledged." : "It was already " + settled + ".";
  var kept = outcome.status === 200 ? store.take([items.stopUrgent(receipt, settled)]).catch(function () {}) : Promise.resolve();
  return kept.then(function () {
    return self.registration.showNotification("Urgent alert stopped", { body: body, tag: items.appKey("urgent", receipt), silent: true });
  });
}

/** A reminder the server pushed at its time (core/services/wake_ups.py). */
function reminded(reminder) {
  return {
    title: "Reminder",
    options: {
      body: reminder.message,
      tag: items.appKey("reminder", reminder.reminder_id),
      requireInteraction: true,
      data: { url: "/app/" },
    },
  };
}

/** Close the notifications of a sequence (a `notification_clear`). */
function cleared(sequenceId) {
  return self.registration.getNotifications({ tag: sequenceId }).then(function (shownNow) {
    shownNow.forEach(function (notification) { notification.close(); });
  });
}

self.addEventListener("push", function (event) {
  var message = {};
  try {
    message = event.data ? event.data.json() : {};
  } catch (error) {
    message = {};
  }
  event.waitUntil(
    Promise.all([self.relayboxStore.load(), notes.emojiTable()]).then(function (loaded) {
      var note = notificationFor(message, loaded[0], loaded[1]);
      return kept(message, loaded[0]).then(function () {
        if (note.clear) return cleared(note.clear);
        return self.registration.showNotification(note.title, note.options);
      });
    }),
  );
});

/** Write what a push carries into the inbox (never failing the push: the queue still has it). */
function kept(message, identity) {
  var changes = [];
  try {
    if (message.payload && identity) {
      var opened = wire.openEnvelope(wire.fromBase64(message.payload), identity.secretKey, identity.serverPublicKey);
      var payload = JSON.parse(wire.fromUtf8(opened));
      changes = payload.type === "reminder" ? [fired(payload)] : items.changesFor(payload, "server");
    } else if (message.type === "ring") {
      changes = items.changesFor({ type: "ring", durationS: message.durationS }, "server");
    }
  } catch (error) {
    changes = [];
  }
  return changes.length ? store.take(changes).catch(function () {}) : Promise.resolve();
}

/** A reminder pushed at its time: its entry says it fired, now. */
function fired(reminder) {
  var key = items.appKey("reminder", reminder.reminder_id);
  return {
    key: key,
    apply: function (known) {
      return Object.assign({}, known || { key: key, kind: "reminder", payload: reminder, from: "server" }, {
        state: "fired",
        at: Date.now(),
      });
    },
  };
}

/** Send a tapped http button's request, then say in the notification's place how it went. */
function tapped(action, data) {
  return notes.perform(action).then(function (result) {
    return self.registration.showNotification(result.sent ? "Sent" : "Not sent", {
      body: notes.outcome(action.label, result),
      tag: data.key,
      silent: true,
      data: { url: "/app/" },
    });
  });
}

/** A tap opens the notification's click URL or its view button's URL, sends its http button's
 * request, answers a question, or acknowledges an urgent notification. */
self.addEventListener("notificationclick", function (event) {
  event.notification.close();
  var data = event.notification.data || {};
  if (data.receipt && event.action === "ack") {
    event.waitUntil(self.relayboxAcknowledge(data.receipt).then(function (outcome) {
      return acknowledged(data.receipt, outcome);
    }));
    return;
  }
  if (data.question && event.action) {
    var index = Number(event.action);
    event.waitUntil(self.relayboxAnswer(data.question, index).then(function (outcome) {
      return answered(data, index, outcome);
    }));
    return;
  }
  var action = event.action && data.actions ? data.actions[Number(event.action)] : null;
  if (action && action.action === "http") {
    event.waitUntil(tapped(action, data));
    return;
  }
  var url = (action && notes.webUrl(action.url)) || data.url || "/app/";
  event.waitUntil(self.clients.openWindow(url));
});

/** The open app's http button: {type: "relaybox-action", action}; the outcome goes back on the port. */
self.addEventListener("message", function (event) {
  var request = event.data || {};
  if (request.type !== "relaybox-action" || !request.action || !event.ports[0]) return;
  event.waitUntil(notes.perform(request.action).then(function (result) {
    event.ports[0].postMessage(result);
  }));
});
