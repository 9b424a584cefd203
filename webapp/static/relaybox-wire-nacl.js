/*
 * relaybox wire code built on NaCl: envelope v1 (core/domain/envelope.py) and the safety number
 * (core/domain/safety.py), with the checks, their order and the error names of the Python code. No
 * primitive is written here: the box, X25519, SHA-512 and the random bytes are tweetnacl's.
 * A classic script, so a classic service worker can load it:
 *
 *   importScripts("/static/vendor/tweetnacl-1.0.3/nacl-fast.js", "/static/relaybox-wire-codec.js",
 *                 "/static/relaybox-wire-nacl.js");
 *   const { openEnvelope } = self.relayboxWire;
 */
(function (scope) {
  "use strict";

  var nacl = scope.nacl;
  var wire = scope.relayboxWire;
  if (!nacl || typeof nacl.box !== "function" || !wire || typeof wire.toBase64 !== "function") {
    throw new Error("relaybox-wire-nacl.js needs tweetnacl's nacl-fast.js and relaybox-wire-codec.js first");
  }
  var ValueError = wire.ValueError;
  var InvalidPublicKey = wire.InvalidPublicKey;
  var KEY_LENGTH = wire.KEY_LENGTH;
  var isBytes = wire.isBytes;
  var concatBytes = wire.concatBytes;
  var utf8 = wire.utf8;
  var EnvelopeError = wire.defineError("EnvelopeError", ValueError);
  var EnvelopeTooShort = wire.defineError("EnvelopeTooShort", EnvelopeError);
  var UnsupportedWireVersion = wire.defineError("UnsupportedWireVersion", EnvelopeError);
  var EnvelopeOpenFailed = wire.defineError("EnvelopeOpenFailed", EnvelopeError);

  // ---- envelope v1 (core/domain/envelope.py) -------------------------------------------------

  var WIRE_VERSION = 0x01;
  var NONCE_LENGTH = 24;
  var TAG_LENGTH = 16;
  var MIN_LENGTH = 1 + NONCE_LENGTH + TAG_LENGTH; // 41: an empty plaintext

  function isAllZero(bytes) {
    var acc = 0;
    for (var i = 0; i < bytes.length; i++) acc |= bytes[i];
    return acc === 0;
  }

  /**
   * X25519 of a secret and a public key, refusing a low-order public key (whose shared secret is
   * all zeros) as libsodium does; the shared secret is what the box key and the chunk key hash.
   */
  function sharedSecret(mySecret, theirPublic) {
    var shared = nacl.scalarMult(mySecret, theirPublic);
    if (isAllZero(shared)) throw new InvalidPublicKey("public key is a low-order point");
    return shared;
  }

  /** The precomputed box key of one (my secret, their public) pair: PairBox in Python. */
  class PairBox {
    constructor(mySecret, theirPublic) {
      if (!isBytes(mySecret) || mySecret.length !== KEY_LENGTH) {
        throw new ValueError("secret key must be 32 bytes");
      }
      if (!isBytes(theirPublic) || theirPublic.length !== KEY_LENGTH) {
        throw new InvalidPublicKey("public key must be 32 bytes");
      }
      sharedSecret(mySecret, theirPublic);
      this._sharedKey = nacl.box.before(theirPublic, mySecret);
    }

    /** A v1 envelope of the plaintext bytes, with a fresh random nonce unless one is given. */
    seal(plaintext, nonce) {
      if (!isBytes(plaintext)) throw new TypeError("plaintext must be bytes");
      if (nonce === undefined) {
        nonce = nacl.randomBytes(NONCE_LENGTH);
      } else if (!isBytes(nonce) || nonce.length !== NONCE_LENGTH) {
        throw new ValueError("nonce must be 24 bytes");
      }
      return concatBytes(Uint8Array.of(WIRE_VERSION), nonce, nacl.box.after(plaintext, nonce, this._sharedKey));
    }

    /** The plaintext of a v1 envelope; any failure raises an EnvelopeError subclass and nothing else. */
    open(blob) {
      if (blob instanceof ArrayBuffer) blob = new Uint8Array(blob);
      if (!isBytes(blob)) throw new EnvelopeError("envelope must be bytes");
      if (blob.length < MIN_LENGTH) {
        throw new EnvelopeTooShort("envelope is " + blob.length + " bytes, the minimum is " + MIN_LENGTH);
      }
      if (blob[0] !== WIRE_VERSION) throw new UnsupportedWireVersion("Unsupported wire version");
      var nonce = blob.subarray(1, 1 + NONCE_LENGTH);
      var plaintext = nacl.box.open.after(blob.subarray(1 + NONCE_LENGTH), nonce, this._sharedKey);
      if (plaintext === null) throw new EnvelopeOpenFailed("envelope failed authentication");
      return plaintext;
    }
  }

  function sealEnvelope(plaintext, senderSecret, recipientPublic, nonce) {
    return new PairBox(senderSecret, recipientPublic).seal(plaintext, nonce);
  }

  function openEnvelope(blob, recipientSecret, senderPublic) {
    return new PairBox(recipientSecret, senderPublic).open(blob);
  }

  /** A fresh X25519 key pair: { secretKey, publicKey }. */
  function generateKeyPair() {
    var pair = nacl.box.keyPair();
    return { secretKey: pair.secretKey, publicKey: pair.publicKey };
  }

  /** The public key of a 32-byte secret key. */
  function publicKeyOf(secret) {
    if (!isBytes(secret) || secret.length !== KEY_LENGTH) throw new ValueError("secret key must be 32 bytes");
    return nacl.box.keyPair.fromSecretKey(secret).publicKey;
  }

  // ---- safety number (core/domain/safety.py) -------------------------------------------------

  var SAFETY_TAG = utf8("platform-safety-v1");
  var ITERATIONS = 5200;
  var GROUPS = 12;
  var GROUP_BYTES = 5;
  var GROUP_DIGITS = 5;

  function compareBytes(a, b) {
    for (var i = 0; i < Math.min(a.length, b.length); i++) {
      if (a[i] !== b[i]) return a[i] - b[i];
    }
    return a.length - b.length;
  }

  /** The 60 decimal digits for two 32-byte public keys, in either order. */
  function safetyNumber(publicA, publicB) {
    [publicA, publicB].forEach(function (key) {
      if (!isBytes(key) || key.length !== KEY_LENGTH) throw new ValueError("public keys must be 32 bytes");
    });
    var ordered = compareBytes(publicA, publicB) <= 0 ? [publicA, publicB] : [publicB, publicA];
    var digest = nacl.hash(concatBytes(SAFETY_TAG, ordered[0], ordered[1]));
    for (var round = 1; round < ITERATIONS; round++) digest = nacl.hash(digest);
    var number = "";
    for (var g = 0; g < GROUPS; g++) {
      var value = 0;
      for (var k = 0; k < GROUP_BYTES; k++) value = value * 256 + digest[g * GROUP_BYTES + k];
      number += String(value % 100000).padStart(GROUP_DIGITS, "0");
    }
    return number;
  }

  /** 12 blocks of 5 digits separated by spaces. */
  function formatSafetyNumber(number) {
    if (typeof number !== "string" || !/^[0-9]{60}$/.test(number)) {
      throw new ValueError("a safety number is 60 decimal digits");
    }
    return number.match(/[0-9]{5}/g).join(" ");
  }

  scope.relayboxWire = Object.freeze(
    Object.assign({}, wire, {
      EnvelopeError: EnvelopeError,
      EnvelopeTooShort: EnvelopeTooShort,
      UnsupportedWireVersion: UnsupportedWireVersion,
      EnvelopeOpenFailed: EnvelopeOpenFailed,
      WIRE_VERSION: WIRE_VERSION,
      NONCE_LENGTH: NONCE_LENGTH,
      MIN_LENGTH: MIN_LENGTH,
      sharedSecret: sharedSecret,
      randomBytes: nacl.randomBytes,
      generateKeyPair: generateKeyPair,
      publicKeyOf: publicKeyOf,
      PairBox: PairBox,
      sealEnvelope: sealEnvelope,
      openEnvelope: openEnvelope,
      safetyNumber: safetyNumber,
      formatSafetyNumber: formatSafetyNumber,
    }),
  );
})(self);
