/*
 * What the phone keeps in its inbox for each payload it receives (docs/protocol.md "Server-composed
 * payloads"), for the page and the service worker alike (a classic script). An entry is
 * {key, kind, at, payload, from, state?, closed?, waiting?}: `kind` is notification, urgent,
 * question, reminder, ring or document; `waiting` marks what still needs the person (an open
 * question, an alerting urgent alert): shown pinned on top, and never dropped by the bound.
 *
 * Keys, which are also the OS notifications' tags, live in two namespaces a sender's id can never
 * cross: a sender's notification is `s:` + its sequence (`sequence_id`, else its id: neither can
 * hold a colon), and everything the app itself shows is `app:…` (questions, urgent alerts,
 * reminders, the ring, documents). So a sender's `sequence_id: "ring"` replaces only its own
 * notifications, never the Ring.
 *
 * Urgent fields (`receipt`, `repeat`, `expire_at`) count only in a payload the server sealed: a
 * paired computer's notification is shown as an ordinary one. And they are held to what the
 * server allows: a receipt of its form, a repeat of 1 s to 1 h, an expiry within 3 h of now.
 */
(function (scope) {
  "use strict";
  var RECEIPT = /^rcp_[0-9a-f]{32}$/;
  var REPEAT_S = [1, 3600];
  var EXPIRE_MAX_S = 3 * 3600 + 60;

  function senderKey(note) {
    return "s:" + String(note.sequence_id || note.id);
  }

  function appKey(kind, id) {
    return "app:" + kind + (id === undefined ? "" : ":" + String(id));
  }

  /** {receipt, repeat, expireAt} of a notification that is urgent until acknowledged, held to the
   * server's bounds, or null: not sealed by the server, or not such a notification. */
  function urgency(note, from) {
    if (from !== "server" || typeof note.receipt !== "string" || !RECEIPT.test(note.receipt)) return null;
    var repeat = Number(note.repeat);
    var expireAt = Number(note.expire_at);
    if (!Number.isFinite(repeat) || !Number.isFinite(expireAt)) return null;
    var now = Date.now() / 1000;
    return {
      receipt: note.receipt,
      repeat: Math.min(Math.max(repeat, REPEAT_S[0]), REPEAT_S[1]),
      expireAt: Math.min(expireAt, now + EXPIRE_MAX_S),
    };
  }

  function fresh(key, kind, payload, from, extra) {
    return Object.assign({ key: key, kind: kind, at: Date.now(), payload: payload, from: from }, extra || {});
  }

  /** Put a new entry, or keep the one there (a replay must not reopen what was settled). */
  function unlessKnown(entry) {
    return { key: entry.key, apply: function (known) { return known ? undefined : entry; } };
  }

  /** Change an entry that is there; nothing when it is not. */
  function patch(key, change) {
    return {
      key: key,
      apply: function (known) { return known ? Object.assign({}, known, change(known)) : undefined; },
    };
  }

  /**
   * The inbox changes for a payload from `from` ("server" or a paired device's id). Payloads
   * that leave no entry (token updates, reminder cancels of unknown reminders) give none.
   */
  function changesFor(payload, from) {
    var type = payload.type;
    if (type === "notification") {
      var urgent = urgency(payload, from);
      if (urgent) {
        var alert = Object.assign({}, payload, { repeat: urgent.repeat, expire_at: urgent.expireAt });
        return [unlessKnown(fresh(appKey("urgent", urgent.receipt), "urgent", alert, from, { state: "alerting", waiting: true }))];
      }
      var plain = Object.assign({}, payload);
      delete plain.receipt;
      delete plain.repeat;
      delete plain.expire_at;
      var entry = fresh(senderKey(plain), "notification", plain, from);
      return [{ key: entry.key, apply: function () { return entry; } }];
    }
    if (type === "notification_clear") {
      return [{ key: "s:" + String(payload.sequence_id), apply: function (known) { return known ? null : undefined; } }];
    }
    if (type === "urgent_stop") return [stopUrgent(payload.receipt, payload.reason)];
    if (type === "interaction_request") {
      return [unlessKnown(fresh(appKey("question", payload.id), "question", payload, from, { state: "open", waiting: true }))];
    }
    if (type === "interaction_closed") {
      return [closeQuestion(payload.id, { state: "answered", by: payload.answered_by, choice: payload.choice_index })];
    }
    if (type === "reminder") {
      return [unlessKnown(fresh(appKey("reminder", payload.reminder_id), "reminder", payload, from, { state: "set" }))];
    }
    if (type === "reminder_cancel") {
      return [patch(appKey("reminder", payload.reminder_id), function () { return { state: "cancelled" }; })];
    }
    if (type === "ring") {
      var seconds = Math.min(Math.max(Number(payload.durationS) || 60, 1), 300);
      return [{ key: appKey("ring"), apply: function () { return fresh(appKey("ring"), "ring", { seconds: seconds }, from, { state: "ringing" }); } }];
    }
    return [];
  }

  /** Stop an alert (acknowledged, "mine": here, cancelled, expired). This browser's own
   * acknowledgement may learn it was "mine" after the server's stop said "acknowledged". */
  function stopUrgent(receipt, reason) {
    return patch(appKey("urgent", receipt), function (known) {
      var mine = reason === "mine" && known.state === "acknowledged";
      return known.state === "alerting" || mine ? { state: reason || "stopped", waiting: false } : {};
    });
  }

  /**
   * Mark a question closed (answered, here or elsewhere, or expired). Once closed, it only learns
   * more: who answered (the server's news after a 409 here), or that the answer was this browser's
   * (its own answer's reply, which may come after the server's news of it).
   */
  function closeQuestion(id, closed) {
    return patch(appKey("question", id), function (known) {
      if (known.state === "open") return Object.assign({ waiting: false }, closed);
      if (closed.mine) return { state: "answered", mine: true, typed: closed.typed, by: closed.by, choice: closed.choice };
      if (closed.by && !known.by) return { state: "answered", by: closed.by, choice: closed.choice };
      return {};
    });
  }

  scope.relayboxItems = {
    senderKey: senderKey,
    appKey: appKey,
    urgency: urgency,
    changesFor: changesFor,
    patch: patch,
    stopUrgent: stopUrgent,
    closeQuestion: closeQuestion,
  };
})(typeof self !== "undefined" ? self : globalThis);
