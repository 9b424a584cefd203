// What a browser keeps about itself once the server knows it (webapp/app/store.js keeps it).
import { fromBase64 } from "/static/relaybox-wire.js";

/** The identity for `keys` (made here) and the server's answer to registering or pairing them. */
export function identityFrom(role, name, keys, answer) {
  return {
    role,
    name,
    deviceId: answer.device_id,
    token: answer.device_token,
    secretKey: keys.secretKey,
    publicKey: keys.publicKey,
    serverPublicKey: fromBase64(answer.server_public_key),
    peers: {},
    lastSeq: 0,
  };
}
