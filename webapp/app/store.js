/*
 * What this browser keeps about itself, in IndexedDB (the service worker reads it too): its role,
 * device id and credential, its X25519 key pair (the secret key never leaves this browser), the
 * server's public key, the devices it paired with, and the last stream position it has seen.
 * A classic script: the page (as a module import) and the service worker (importScripts) share it.
 */
(function (scope) {
  "use strict";
  var DB = "relaybox";
  var STORE = "identity";
  var KEY = "self";

  function open() {
    return new Promise(function (resolve, reject) {
      var request = indexedDB.open(DB, 1);
      request.onupgradeneeded = function () {
        request.result.createObjectStore(STORE);
      };
      request.onsuccess = function () { resolve(request.result); };
      request.onerror = function () { reject(request.error); };
    });
  }

  function run(mode, action) {
    return open().then(function (db) {
      return new Promise(function (resolve, reject) {
        var tx = db.transaction(STORE, mode);
        var request = action(tx.objectStore(STORE));
        tx.oncomplete = function () { db.close(); resolve(request.result); };
        tx.onerror = function () { db.close(); reject(tx.error); };
      });
    });
  }

  /** This browser's identity, or undefined before set-up. */
  function load() {
    return run("readonly", function (store) { return store.get(KEY); });
  }

  /** Replace the identity (a structured clone: Uint8Arrays stay bytes). */
  function save(identity) {
    return run("readwrite", function (store) { return store.put(identity, KEY); });
  }

  /** Change some fields of the stored identity. */
  function update(changes) {
    return load().then(function (identity) {
      return save(Object.assign({}, identity, changes));
    });
  }

  function forget() {
    return run("readwrite", function (store) { return store.delete(KEY); });
  }

  scope.relayboxStore = Object.freeze({ load: load, save: save, update: update, forget: forget });
})(typeof self !== "undefined" ? self : globalThis);
