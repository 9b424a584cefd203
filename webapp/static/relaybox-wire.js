/*
 * relaybox wire code for the pages, an ES module: everything the classic scripts
 * relaybox-wire-codec.js and relaybox-wire-nacl.js offer (canonical JSON, base64, envelope v1,
 * the safety number; a service worker loads those two itself) plus file-transfer chunks
 * (docs/protocol.md "File-transfer chunks", core/domain/chunks.py): HKDF-SHA-256 key derivation
 * and XChaCha20-Poly1305 seal/open with the chunk nonce and associated data. The primitives are
 * the vendored libraries' (tweetnacl, @noble/ciphers, @noble/hashes); nothing here is one.
 *
 *   import { openEnvelope, ChunkCipher } from "/static/relaybox-wire.js";
 */
import "./vendor/tweetnacl-1.0.3/nacl-fast.js";
import "./relaybox-wire-codec.js";
import "./relaybox-wire-nacl.js";
import { xchacha20poly1305 } from "./vendor/noble-ciphers-2.4.0/chacha.js";
import { hkdf } from "./vendor/noble-hashes-2.4.0/hkdf.js";
import { sha256 } from "./vendor/noble-hashes-2.4.0/sha2.js";

const wire = globalThis.relayboxWire;

export const {
  defineError,
  ValueError,
  InvalidPublicKey,
  EnvelopeError,
  EnvelopeTooShort,
  UnsupportedWireVersion,
  EnvelopeOpenFailed,
  KEY_LENGTH,
  WIRE_VERSION,
  NONCE_LENGTH,
  MIN_LENGTH,
  isBytes,
  utf8,
  fromUtf8,
  concatBytes,
  toBase64,
  fromBase64,
  toBase64Url,
  fromBase64Url,
  decodePublicKey,
  canonicalJson,
  canonicalJsonText,
  sharedSecret,
  randomBytes,
  generateKeyPair,
  publicKeyOf,
  PairBox,
  sealEnvelope,
  openEnvelope,
  safetyNumber,
  formatSafetyNumber,
} = wire;

export { sha256 };

/** HKDF with SHA-256 (RFC 5869). */
export function hkdfSha256(ikm, salt, info, length) {
  return hkdf(sha256, ikm, salt, info, length);
}

// ---- file-transfer chunks (core/domain/chunks.py) ---------------------------------------------

export const CHUNK_FORMAT = "xchacha20poly1305-chunked-v1";
export const CHUNK_KEY_LENGTH = 32;
export const NONCE_PREFIX_LENGTH = 16;
export const CHUNK_NONCE_LENGTH = 24;
export const TAG_LENGTH = 16;
export const MAX_INDEX = 2n ** 64n - 1n;
const MAX_ID_BYTES = 0xffff;
const FORMAT_BYTES = utf8(CHUNK_FORMAT);

/** Every chunk failure: bad input, tampering, wrong index or finality (a ValueError, as in Python). */
export const ChunkError = defineError("ChunkError", ValueError);

function encodeId(value, name) {
  if (typeof value !== "string") throw new ChunkError(`${name} must be a string`);
  let raw;
  try {
    raw = utf8(value);
  } catch {
    throw new ChunkError(`${name} is not valid Unicode`);
  }
  if (!(raw.length > 0 && raw.length <= MAX_ID_BYTES)) {
    throw new ChunkError(`${name} must be 1..65535 UTF-8 bytes`);
  }
  return raw;
}

/** A chunk index as a BigInt: a safe integer Number or a BigInt in 0..2**64-1, else ChunkError. */
function checkIndex(index) {
  const valid =
    (typeof index === "bigint" && index >= 0n && index <= MAX_INDEX) ||
    (typeof index === "number" && Number.isSafeInteger(index) && index >= 0);
  if (!valid) throw new ChunkError("chunk index must be an integer in 0..2**64-1");
  return BigInt(index);
}

function bigEndian(bytes, value) {
  const out = new Uint8Array(bytes);
  const view = new DataView(out.buffer);
  if (bytes === 8) view.setBigUint64(0, value, false);
  else if (bytes === 2) view.setUint16(0, value, false);
  else view.setUint8(0, value);
  return out;
}

/** The 32-byte chunk key of one transfer; both devices derive the same key. */
export function deriveChunkKey(mySecret, theirPublic, transferId) {
  for (const key of [mySecret, theirPublic]) {
    if (!isBytes(key) || key.length !== KEY_LENGTH) throw new ChunkError("X25519 keys must be 32 bytes");
  }
  const salt = encodeId(transferId, "transfer id");
  let shared;
  try {
    shared = sharedSecret(mySecret, theirPublic);
  } catch {
    throw new ChunkError("public key is a low-order point");
  }
  return hkdfSha256(shared, salt, FORMAT_BYTES, CHUNK_KEY_LENGTH);
}

/** A fresh random 16-byte nonce prefix for one transfer. */
export function newNoncePrefix() {
  return randomBytes(NONCE_PREFIX_LENGTH);
}

/** The 24-byte nonce of chunk `index`: prefix ‖ u64be index. */
export function chunkNonce(noncePrefix, index) {
  if (!isBytes(noncePrefix) || noncePrefix.length !== NONCE_PREFIX_LENGTH) {
    throw new ChunkError("nonce prefix must be 16 bytes");
  }
  return concatBytes(noncePrefix, bigEndian(8, checkIndex(index)));
}

/** The associated data binding a chunk to its transfer, file, index and finality. */
export function associatedData(transferId, fileId, index, isFinal) {
  const transfer = encodeId(transferId, "transfer id");
  const file = encodeId(fileId, "file id");
  const position = checkIndex(index);
  return concatBytes(
    FORMAT_BYTES,
    bigEndian(2, transfer.length),
    transfer,
    bigEndian(2, file.length),
    file,
    bigEndian(8, position),
    bigEndian(1, isFinal ? 1 : 0),
  );
}

/** Seals and opens the chunks of one file within one transfer. */
export class ChunkCipher {
  constructor(key, noncePrefix, transferId, fileId) {
    if (!isBytes(key) || key.length !== CHUNK_KEY_LENGTH) throw new ChunkError("chunk key must be 32 bytes");
    if (!isBytes(noncePrefix) || noncePrefix.length !== NONCE_PREFIX_LENGTH) {
      throw new ChunkError("nonce prefix must be 16 bytes");
    }
    encodeId(transferId, "transfer id");
    encodeId(fileId, "file id");
    this._key = key;
    this._noncePrefix = noncePrefix;
    this._transferId = transferId;
    this._fileId = fileId;
  }

  /** One chunk sealed: the ciphertext followed by the 16-byte tag. */
  seal(index, plaintext, isFinal) {
    if (!isBytes(plaintext)) throw new ChunkError("chunk plaintext must be bytes");
    const [nonce, ad] = this._nonceAndAd(index, isFinal);
    return xchacha20poly1305(this._key, nonce, ad).encrypt(plaintext);
  }

  /** One chunk opened, or ChunkError unless it was sealed with this index and finality. */
  open(index, ciphertext, isFinal) {
    if (!isBytes(ciphertext) || ciphertext.length < TAG_LENGTH) {
      throw new ChunkError("chunk ciphertext must be bytes of at least 16");
    }
    const [nonce, ad] = this._nonceAndAd(index, isFinal);
    try {
      return xchacha20poly1305(this._key, nonce, ad).decrypt(ciphertext);
    } catch {
      throw new ChunkError("chunk failed authentication");
    }
  }

  /** `data` split into chunks of `chunkSize` bytes and sealed; the last is final, an empty file
   *  is one empty final chunk, and chunk i has index firstIndex + i. */
  sealFile(data, firstIndex, chunkSize) {
    if (!isBytes(data)) throw new ChunkError("file data must be bytes");
    if (!Number.isSafeInteger(chunkSize) || chunkSize < 1) throw new ChunkError("chunk size must be positive");
    const pieces = [];
    for (let at = 0; at < data.length; at += chunkSize) pieces.push(data.subarray(at, at + chunkSize));
    if (pieces.length === 0) pieces.push(new Uint8Array(0));
    const first = checkIndex(firstIndex);
    checkIndex(first + BigInt(pieces.length - 1));
    const last = pieces.length - 1;
    return pieces.map((piece, i) => this.seal(first + BigInt(i), piece, i === last));
  }

  /** A whole file opened: chunk i has index firstIndex + i and only the last is final, so a
   *  missing tail, an extra chunk or chunks out of order raise ChunkError. */
  openFile(chunks, firstIndex) {
    if (!Array.isArray(chunks) || chunks.length === 0) throw new ChunkError("a file has at least one chunk");
    const first = checkIndex(firstIndex);
    const last = chunks.length - 1;
    return concatBytes(...chunks.map((chunk, i) => this.open(first + BigInt(i), chunk, i === last)));
  }

  _nonceAndAd(index, isFinal) {
    if (typeof isFinal !== "boolean") throw new ChunkError("is_final must be a bool");
    const ad = associatedData(this._transferId, this._fileId, index, isFinal);
    return [chunkNonce(this._noncePrefix, index), ad];
  }
}
