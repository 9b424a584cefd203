/*
 * What this browser keeps, in IndexedDB, for the page and the service worker alike (a classic
 * script: the page imports it, the worker loads it with importScripts):
 *
 * - `identity`: its role, device id and credential, its X25519 key pair (the secret key never
 *   leaves this browser), the server's public key, the devices it paired with, its armed
 *   reminders, `lastSeq`, the last stream position it has taken in, and `pushRefusal`, why the
 *   server refused this browser's push service (until a try succeeds);
 * - `inbox`: what it received, one entry per key (webapp/app/items.js makes them): kept across
 *   reloads and restarts, bounded to the newest KEEP entries (open questions and alerting urgent
 *   alerts are never dropped while they wait for the person);
 * - `files`: attachments opened in this browser, by attachment id, at most FILE_BYTES in all
 *   (the oldest go first; an entry whose file went is fetched again while the server keeps it).
 *
 * An entry and the stream position it came with are written in one transaction (`take`), so a
 * page closed at any moment neither loses a message (its position was not kept either, and the
 * stream replays it) nor shows one twice (entries are keyed, and a replay finds its own).
 */
(function (scope) {
  "use strict";
  var DB = "relaybox";
  var VERSION = 2;
  var IDENTITY = "identity";
  var SELF = "self";
  var INBOX = "inbox";
  var FILES = "files";
  var KEEP = 500;
  var FILE_BYTES = 50 * 1024 * 1024;
  var opening = null;

  function open() {
    return new Promise(function (resolve, reject) {
      var request = indexedDB.open(DB, VERSION);
      request.onupgradeneeded = function (event) {
        var db = request.result;
        if (event.oldVersion < 1) db.createObjectStore(IDENTITY);
        if (event.oldVersion < 2) {
          db.createObjectStore(INBOX, { keyPath: "key" }).createIndex("at", "at");
          db.createObjectStore(FILES, { keyPath: "id" }).createIndex("at", "at");
        }
      };
      request.onsuccess = function () {
        var db = request.result;
        db.onversionchange = function () { db.close(); opening = null; }; // a newer app upgrades it
        resolve(db);
      };
      request.onerror = function () { reject(request.error); };
    });
  }

  /** One connection for this page or worker, opened on first use. */
  function database() {
    if (!opening) {
      opening = open().catch(function (error) { opening = null; throw error; });
    }
    return opening;
  }

  /**
   * Run `work(stores, result)` in one transaction over `names`: it gets the object stores by name
   * and sets `result.value` from its callbacks. Resolves with that value once the transaction has
   * committed, rejects if it aborts.
   */
  function run(names, mode, work) {
    return database().then(function (db) {
      return new Promise(function (resolve, reject) {
        var tx = db.transaction(names, mode);
        var stores = {};
        names.forEach(function (name) { stores[name] = tx.objectStore(name); });
        var result = { value: undefined };
        tx.oncomplete = function () { resolve(result.value); };
        tx.onerror = function () { reject(tx.error); };
        tx.onabort = function () { reject(tx.error || new Error("the transaction was aborted")); };
        work(stores, result);
      });
    });
  }

  /** This browser's identity, or undefined before set-up. */
  function load() {
    return run([IDENTITY], "readonly", function (stores, result) {
      stores[IDENTITY].get(SELF).onsuccess = function (event) { result.value = event.target.result; };
    });
  }

  /** Replace the identity (a structured clone: Uint8Arrays stay bytes). */
  function save(identity) {
    return run([IDENTITY], "readwrite", function (stores) { stores[IDENTITY].put(identity, SELF); });
  }

  /** Change some fields of the stored identity, read and written in one transaction (no writer
   * loses another's field). `changes`: the fields, or a function of the identity that gives them. */
  function update(changes) {
    return run([IDENTITY], "readwrite", function (stores, result) {
      stores[IDENTITY].get(SELF).onsuccess = function (event) {
        var identity = event.target.result;
        if (!identity) return;
        var fields = typeof changes === "function" ? changes(identity) : changes;
        result.value = Object.assign({}, identity, fields);
        stores[IDENTITY].put(result.value, SELF);
      };
    });
  }

  /** This browser forgets everything: identity, inbox and files. */
  function forget() {
    return run([IDENTITY, INBOX, FILES], "readwrite", function (stores) {
      stores[IDENTITY].delete(SELF);
      stores[INBOX].clear();
      stores[FILES].clear();
    });
  }

  /**
   * Apply `changes` to the inbox and, with `seq`, move `lastSeq` to it, in one transaction. Each
   * change is {key, apply}: `apply(entry or undefined)` returns the entry to keep, null to delete
   * it, or undefined to leave it as it is. Resolves with the keys that changed.
   */
  function take(changes, seq) {
    return run([IDENTITY, INBOX], "readwrite", function (stores, result) {
      result.value = [];
      changes.forEach(function (change) {
        stores[INBOX].get(change.key).onsuccess = function (event) {
          var next = change.apply(event.target.result);
          if (next === undefined) return;
          if (next === null) stores[INBOX].delete(change.key);
          else stores[INBOX].put(next);
          result.value.push(change.key);
        };
      });
      if (seq) {
        stores[IDENTITY].get(SELF).onsuccess = function (event) {
          var identity = event.target.result;
          if (identity && !(identity.lastSeq >= seq)) {
            stores[IDENTITY].put(Object.assign({}, identity, { lastSeq: seq }), SELF);
          }
        };
      }
    });
  }

  /** Every inbox entry, newest first. */
  function entries() {
    return run([INBOX], "readonly", function (stores, result) {
      stores[INBOX].getAll().onsuccess = function (event) {
        result.value = event.target.result.sort(function (a, b) { return b.at - a.at; });
      };
    });
  }

  /** Delete the entries of `keys` (a dismiss, or clear all). */
  function remove(keys) {
    return run([INBOX], "readwrite", function (stores) {
      keys.forEach(function (key) { stores[INBOX].delete(key); });
    });
  }

  /** Keep the newest KEEP entries, and every entry that still waits for the person. */
  function prune() {
    return run([INBOX], "readwrite", function (stores) {
      var kept = 0;
      stores[INBOX].index("at").openCursor(null, "prev").onsuccess = function (event) {
        var cursor = event.target.result;
        if (!cursor) return;
        if (cursor.value.waiting || kept < KEEP) kept += 1;
        else cursor.delete();
        cursor.continue();
      };
    });
  }

  /** An attachment opened before: {id, blob, at}, or undefined. */
  function file(id) {
    return run([FILES], "readonly", function (stores, result) {
      stores[FILES].get(id).onsuccess = function (event) { result.value = event.target.result; };
    });
  }

  /** Keep an opened attachment, dropping the oldest ones past FILE_BYTES in all. */
  function keepFile(id, blob) {
    return run([FILES], "readwrite", function (stores) {
      stores[FILES].put({ id: id, blob: blob, size: blob.size, at: Date.now() });
      var total = 0;
      stores[FILES].index("at").openCursor(null, "prev").onsuccess = function (event) {
        var cursor = event.target.result;
        if (!cursor) return;
        total += cursor.value.size;
        if (total > FILE_BYTES && cursor.value.id !== id) cursor.delete();
        cursor.continue();
      };
    });
  }

  scope.relayboxStore = Object.freeze({
    load: load,
    save: save,
    update: update,
    forget: forget,
    take: take,
    entries: entries,
    remove: remove,
    prune: prune,
    file: file,
    keepFile: keepFile,
    KEEP: KEEP,
  });
})(typeof self !== "undefined" ? self : globalThis);
