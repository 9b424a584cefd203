/*
 * A notification payload (docs/protocol.md "Server-composed payloads") as this phone shows it, for
 * the page and the service worker alike: its sequence (`s:` + `sequence_id`, else `s:` + `id`: a
 * notification of the same sequence replaces the one shown, as the OS notification's tag; items.js
 * must be loaded first), its tags that are emoji
 * short codes as emoji before the title (the one table both reference phones read,
 * /static/emoji-tags.json), and its http buttons, sent only when the person taps one. A classic
 * script: the page imports it, the service worker loads it with importScripts.
 *
 * The OS notification shows the message as plain text (Markdown markers stay as typed; the open app
 * renders Markdown), its first two buttons (what browsers show), and no icon: loading the sender's
 * image would be a request to a third party, telling it when the notification was seen.
 */
(function (scope) {
  "use strict";
  var TABLE_URL = "/static/emoji-tags.json";
  var ACTION_TIMEOUT_MS = 10000;
  var OS_ACTIONS = 2;
  var table = null;

  /** The sequence a notification belongs to, in the senders' namespace (webapp/app/items.js): a
   * later one with the same key replaces it. */
  function key(note) {
    return scope.relayboxItems.senderKey(note);
  }

  /** Short code → emoji, fetched from this server once (an empty table if that fails). */
  function emojiTable() {
    if (!table) {
      table = fetch(TABLE_URL)
        .then(function (response) { return response.ok ? response.json() : { tags: {} }; })
        .then(function (document) { return document.tags || {}; })
        .catch(function () { table = null; return {}; });
    }
    return table;
  }

  /** {emoji, others}: the tags that are short codes as emoji, and the rest as text, each in order. */
  function splitTags(tags, emoji) {
    var split = { emoji: [], others: [] };
    (Array.isArray(tags) ? tags : []).forEach(function (tag) {
      if (Object.prototype.hasOwnProperty.call(emoji, tag)) split.emoji.push(emoji[tag]);
      else split.others.push(String(tag));
    });
    return split;
  }

  /** {title, body}: the emoji before the title, or before the message when there is no title. */
  function heading(note, emoji) {
    var lead = splitTags(note.tags, emoji).emoji;
    if (note.title) return { title: lead.concat([note.title]).join(" "), body: note.message };
    return { title: "relaybox", body: lead.concat([note.message]).join(" ") };
  }

  /** A file's size in words: 930 bytes, 12 KB, 3.4 MB. */
  function size(bytes) {
    var n = Number(bytes) || 0;
    if (n < 1000) return n + " bytes";
    if (n < 1000000) return Math.round(n / 1000) + " KB";
    return (n / 1000000).toFixed(1) + " MB";
  }

  /** What an attachment is, in one line: "photo.jpg (image/jpeg, 120 KB)". */
  function attachmentLine(attachment) {
    return String(attachment.name || "a file") + " (" + String(attachment.type || "file") + ", " + size(attachment.size) + ")";
  }

  /** The OS notification of a payload: {title, options} for showNotification; an attachment is
   * named in the body (it is opened in the app, where images show inline). */
  function shown(note, emoji) {
    var urgent = note.priority === "high" || note.priority === "urgent";
    var actions = (note.actions || []).slice(0, OS_ACTIONS);
    var text = heading(note, emoji);
    if (note.attachment) text.body += "\n📎 " + attachmentLine(note.attachment) + ": tap to open it";
    return {
      title: text.title,
      options: {
        body: text.body,
        tag: key(note),
        renotify: urgent, // a replacement is quiet unless it matters
        requireInteraction: urgent,
        silent: note.priority === "min",
        actions: actions.map(function (action, index) {
          return { action: String(index), title: action.label };
        }),
        data: { url: webUrl(note.url) || "/app/", actions: actions, key: key(note) },
      },
    };
  }

  /** `url` when it is an http(s) URL (what the server lets through), else null. */
  function webUrl(url) {
    return typeof url === "string" && /^https?:\/\//i.test(url) ? url : null;
  }

  /**
   * Send an http button's request: no credentials, no referrer. POST and GET go as simple requests
   * (`no-cors`: the far end gets them whatever its CORS policy, and the answer cannot be read); PUT
   * needs the far end's CORS consent. Resolves to {sent, status?, error?}, never rejects.
   */
  function perform(action) {
    var method = action.method || "POST";
    var controller = new AbortController();
    var timer = setTimeout(function () { controller.abort(); }, ACTION_TIMEOUT_MS);
    var init = {
      method: method,
      mode: method === "PUT" ? "cors" : "no-cors",
      credentials: "omit",
      referrerPolicy: "no-referrer",
      cache: "no-store",
      signal: controller.signal,
    };
    if (action.body && method !== "GET") init.body = action.body;
    if (!webUrl(action.url)) return Promise.resolve({ sent: false, error: "not an http(s) URL" });
    return fetch(action.url, init)
      .then(function (response) {
        return response.type === "opaque" ? { sent: true } : { sent: true, status: response.status };
      })
      .catch(function (error) {
        return { sent: false, error: error.name === "AbortError" ? "no answer in 10 s" : error.message };
      })
      .finally(function () { clearTimeout(timer); });
  }

  /** One sentence for the outcome of a tapped http button. */
  function outcome(label, result) {
    if (!result.sent) return "Could not send " + label + ": " + result.error + ".";
    return result.status ? "Sent " + label + " (HTTP " + result.status + ")." : "Sent " + label + ".";
  }

  scope.relayboxNotes = {
    key: key,
    emojiTable: emojiTable,
    splitTags: splitTags,
    heading: heading,
    shown: shown,
    size: size,
    attachmentLine: attachmentLine,
    webUrl: webUrl,
    perform: perform,
    outcome: outcome,
  };
})(typeof self !== "undefined" ? self : globalThis);
