/*
 * The relaybox web app's service worker: a classic worker (what every browser with web push runs,
 * Safari 16.4+ included), registered at /app/sw.js with the scope /app/. It loads tweetnacl and the
 * relaybox wire code, so it can open envelopes (self.relayboxWire.openEnvelope) when it handles a
 * push; the push, notification and caching handlers come with the app's flows.
 */
importScripts(
  "/static/vendor/tweetnacl-1.0.3/nacl-fast.js",
  "/static/relaybox-wire-codec.js",
  "/static/relaybox-wire-nacl.js",
);

self.addEventListener("install", (event) => {
  event.waitUntil(self.skipWaiting());
});

self.addEventListener("activate", (event) => {
  event.waitUntil(self.clients.claim());
});
