// The browser as the account's phone: its keys are made here and kept in IndexedDB (the secret
// key is never sent); it registers as a phone (device_type "web"), pairs computers by their code,
// confirms AI-assistant consent codes, manages sender tokens and connector grants, and opens what
// the server and its computers send it.
import { call } from "/app/api.js";
import { identityFrom } from "/app/identity.js";
import "/app/store.js";
import {
  fromBase64,
  fromUtf8,
  formatSafetyNumber,
  generateKeyPair,
  openEnvelope,
  safetyNumber,
  toBase64,
} from "/static/relaybox-wire.js";

const store = globalThis.relayboxStore;
// The web app's build, reported as any phone reports its app's (the server's capability gates read
// it: RELAYBOX_MIN_BUILD_*). Raise it with each release of the web phone's abilities.
// 2: typed replies to questions (allow_text); 3: notification_clear; 4: urgent repeats;
// 5: the kept inbox, interaction_closed, attachments.
export const WEB_APP_BUILD = 5;

/** Register this browser as the phone; `extra`: more fields of the registration (an invite). */
export async function registerPhone(name, extra = {}) {
  const keys = generateKeyPair();
  const body = { ...extra, public_key: toBase64(keys.publicKey), name, device_type: "web", app_build: WEB_APP_BUILD };
  const registered = await call("POST", "/v1/devices", { body });
  const identity = { ...identityFrom("phone", name, keys, registered), appBuild: WEB_APP_BUILD };

  await store.save(identity);
  return identity;
}

/** After an update of the web app, tell the server its new build. */
export async function reportBuild(identity) {
  if (identity.appBuild === WEB_APP_BUILD) return;
  await call("PATCH", "/v1/devices/me", { token: identity.token, body: { app_build: WEB_APP_BUILD } });
  await store.update({ appBuild: WEB_APP_BUILD });
}

/**
 * Redeem a six-digit code: a computer's pairing code (the answer names the computer and the
 * safety number both screens show) or an AI assistant's consent code (the answer names the app).
 */
export async function confirmCode(identity, code) {
  const body = { code, public_key: toBase64(identity.publicKey) };
  const answer = await call("POST", "/v1/pair/confirm", { token: identity.token, body });
  if (answer.intent === "connector") return { intent: "connector", clientName: answer.client_name };
  const device = answer.device;
  const theirs = fromBase64(device.public_key);
  const peers = { ...identity.peers, [device.device_id]: { name: device.name, publicKey: theirs } };
  await store.update({ peers });
  identity.peers = peers;
  return { intent: "pair", name: device.name, safetyNumber: formatSafetyNumber(safetyNumber(identity.publicKey, theirs)) };
}

export const tokens = {
  list: (identity) => call("GET", "/v1/tokens", { token: identity.token }).then((answer) => answer.tokens),
  create: (identity, label, mayRing) =>
    call("POST", "/v1/tokens", { token: identity.token, body: mayRing ? { label, scope: "phone:control" } : { label } }),
  revoke: (identity, id) => call("DELETE", `/v1/tokens/${encodeURIComponent(id)}`, { token: identity.token }),
};

export const grants = {
  list: (identity) => call("GET", "/v1/connector-grants", { token: identity.token }).then((answer) => answer.grants),
  revoke: (identity, id) =>
    call("DELETE", `/v1/connector-grants/${encodeURIComponent(id)}`, { token: identity.token }),
};

/** The payload of an envelope frame ({from, type, blob}), opened with this browser's key. */
export function openFrame(identity, frame) {
  const sender = frame.from;
  const key = sender === "server" ? identity.serverPublicKey : identity.peers[sender]?.publicKey;
  if (!key) return { type: frame.type, unreadable: `from a device this browser did not pair (${sender})` };
  return JSON.parse(fromUtf8(openEnvelope(fromBase64(frame.blob), identity.secretKey, key)));
}

/** A ready curl line for a new token, against this server. */
export function curlLine(token) {
  return `curl -H "Authorization: Bearer ${token}" -d "Backup done" ${location.origin}/v1/send`;
}
