// The browser as one of the person's computers: it pairs with the phone by showing a code the phone
// confirms (both then show the same safety number), and receives what the phone sends it (texts,
// token changes) while the page is open.
import { call } from "/app/api.js";
import { identityFrom } from "/app/identity.js";
import "/app/store.js";
import { formatSafetyNumber, fromBase64, generateKeyPair, safetyNumber, toBase64 } from "/static/relaybox-wire.js";

const store = globalThis.relayboxStore;
const POLL_MS = 1500;

/** A code for the phone to confirm; the browser is a computer-to-be until it does. */
export async function startPairing(name) {
  const keys = generateKeyPair();
  const body = { public_key: toBase64(keys.publicKey), surface_kind: "pwa", device_type: "web", name };
  const started = await call("POST", "/v1/pair/init", { body });
  const identity = identityFrom("pairing", name, keys, started);

  await store.save(identity);
  return { identity, code: started.code, expiresAt: started.expires_at };
}

/** Wait until the phone confirms the code (410 pairing_expired once it lapses). */
export async function waitForPhone(identity) {
  for (;;) {
    const result = await call("GET", "/v1/pair/result", { token: identity.token });
    if (result.status === "paired") {
      const phoneKey = fromBase64(result.phone_public_key);
      const paired = {
        ...identity,
        role: "computer",
        phone: { id: result.phone_device_id, name: result.phone_name },
        peers: { [result.phone_device_id]: { name: result.phone_name, publicKey: phoneKey } },
      };
      await store.save(paired);
      return paired;
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

export function safetyNumberWithPhone(identity) {
  const phoneKey = identity.peers[identity.phone.id].publicKey;
  return formatSafetyNumber(safetyNumber(identity.publicKey, phoneKey));
}

/** One line for what arrived from the phone or the server (already opened). */
export function describe(identity, sender, payload) {
  const from = identity.peers[sender]?.name ?? "the server";
  if (payload.unreadable) return `A ${payload.type} ${payload.unreadable}`;
  if (payload.type === "clipboard") return `From ${from}: ${payload.text}`;
  if (payload.type === "token_update") return `Sender tokens changed: ${payload.tokens.length} active.`;
  return `A ${payload.type} from ${from}.`;
}
