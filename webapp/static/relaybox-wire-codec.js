/*
 * relaybox wire code, the part without cryptography: the errors' hierarchy, UTF-8, the base64 the
 * JSON API uses (and base64url for web push) and canonical JSON (core/domain/canonical.py). A
 * classic script, so a classic service worker can importScripts it; it starts self.relayboxWire,
 * which relaybox-wire-nacl.js completes. The pages get all of it from relaybox-wire.js.
 */
(function (scope) {
  "use strict";

  // ---- errors: the Python classes' names and hierarchy (each is a ValueError there) ----------

  /** A subclass of `Base` whose `name` (on the class and its errors) is `name`. */
  function defineError(name, Base) {
    var ErrorClass = class extends Base {};
    Object.defineProperty(ErrorClass, "name", { value: name });
    Object.defineProperty(ErrorClass.prototype, "name", { value: name, writable: true });
    return ErrorClass;
  }

  var ValueError = defineError("ValueError", Error);
  var InvalidPublicKey = defineError("InvalidPublicKey", ValueError);

  var KEY_LENGTH = 32;

  // ---- bytes ---------------------------------------------------------------------------------

  var utf8Encoder = new TextEncoder();
  var utf8Decoder = new TextDecoder("utf-8", { fatal: true });
  var LONE_SURROGATE = /\p{Surrogate}/u; // with the u flag a proper pair is one code point

  function isBytes(value) {
    return value instanceof Uint8Array;
  }

  /** UTF-8 of a string; a lone surrogate is not Unicode text and raises ValueError. */
  function utf8(text) {
    if (typeof text !== "string") throw new TypeError("text must be a string");
    if (LONE_SURROGATE.test(text)) throw new ValueError("text holds a lone surrogate");
    return utf8Encoder.encode(text);
  }

  /** The text of UTF-8 bytes; invalid UTF-8 raises ValueError. */
  function fromUtf8(bytes) {
    try {
      return utf8Decoder.decode(bytes);
    } catch (error) {
      throw new ValueError("bytes are not valid UTF-8");
    }
  }

  function concatBytes() {
    var total = 0;
    var i;
    for (i = 0; i < arguments.length; i++) total += arguments[i].length;
    var out = new Uint8Array(total);
    var offset = 0;
    for (i = 0; i < arguments.length; i++) {
      out.set(arguments[i], offset);
      offset += arguments[i].length;
    }
    return out;
  }

  // ---- base64 (standard with padding, as the JSON API; and base64url for web push) ------------

  var STANDARD = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

  function toBase64(bytes) {
    if (!isBytes(bytes)) throw new TypeError("bytes must be a Uint8Array");
    var binary = "";
    for (var i = 0; i < bytes.length; i += 0x8000) {
      binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    }
    return btoa(binary);
  }

  /** Standard base64 with padding, strictly (Python's b64decode(validate=True)); else ValueError. */
  function fromBase64(text) {
    if (typeof text !== "string" || !STANDARD.test(text)) {
      throw new ValueError("not standard base64");
    }
    var binary = atob(text);
    var out = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
    return out;
  }

  function toBase64Url(bytes) {
    return toBase64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  /** base64url, padded or not (browsers give web-push keys unpadded); else ValueError. */
  function fromBase64Url(text) {
    var match = typeof text === "string" ? /^([A-Za-z0-9_-]*)(={0,2})$/.exec(text) : null;
    var bare = match ? match[1] : "";
    if (!match || bare.length % 4 === 1 || (match[2] && (bare.length + match[2].length) % 4 !== 0)) {
      throw new ValueError("not base64url");
    }
    var standard = bare.replace(/-/g, "+").replace(/_/g, "/");
    return fromBase64(standard + "==".slice(0, (4 - (standard.length % 4)) % 4));
  }

  /** A public key as the JSON API spells it: the canonical base64 of exactly 32 bytes. */
  function decodePublicKey(text) {
    if (typeof text !== "string") throw new InvalidPublicKey("public key must be a string");
    var raw;
    try {
      raw = fromBase64(text);
    } catch (error) {
      throw new InvalidPublicKey("public key is not standard base64");
    }
    if (raw.length !== KEY_LENGTH) throw new InvalidPublicKey("public key must be 32 bytes");
    if (toBase64(raw) !== text) throw new InvalidPublicKey("public key is not canonical base64");
    return raw;
  }

  // ---- canonical JSON (core/domain/canonical.py: json.dumps compact, ensure_ascii=False) -------

  /**
   * The UTF-8 bytes Python's canonical_json gives for the same value. Keys keep insertion order
   * (a Map keeps any key's place; a plain object puts integer-like keys first, as JavaScript
   * does). NaN and the infinities raise ValueError, as does a number that cannot say whether it
   * is an int (an integer-valued number beyond 2**53: pass a BigInt) and anything that is not
   * JSON (undefined, functions, class instances, cycles).
   */
  function canonicalJson(value) {
    return utf8(canonicalJsonText(value));
  }

  function canonicalJsonText(value) {
    return encodeJson(value, []);
  }

  function encodeJson(value, ancestors) {
    if (value === null) return "null";
    switch (typeof value) {
      case "boolean":
        return value ? "true" : "false";
      case "string":
        if (LONE_SURROGATE.test(value)) throw new ValueError("text holds a lone surrogate");
        return JSON.stringify(value);
      case "bigint":
        return value.toString();
      case "number":
        return encodeNumber(value);
      case "object":
        return encodeContainer(value, ancestors);
      default:
        throw new ValueError("a " + typeof value + " is not JSON");
    }
  }

  function encodeContainer(value, ancestors) {
    if (ancestors.indexOf(value) !== -1) throw new ValueError("circular reference");
    var inner = ancestors.concat([value]);
    var parts = [];
    if (Array.isArray(value)) {
      for (var i = 0; i < value.length; i++) parts.push(encodeJson(value[i], inner));
      return "[" + parts.join(",") + "]";
    }
    var entries;
    if (value instanceof Map) {
      entries = Array.from(value.entries());
    } else if (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null) {
      entries = Object.keys(value).map(function (key) {
        return [key, value[key]];
      });
    } else {
      throw new ValueError("only plain objects, Maps and arrays are JSON containers");
    }
    for (var j = 0; j < entries.length; j++) {
      if (typeof entries[j][0] !== "string") throw new ValueError("JSON object keys must be strings");
      parts.push(encodeJson(entries[j][0], inner) + ":" + encodeJson(entries[j][1], inner));
    }
    return "{" + parts.join(",") + "}";
  }

  /** Integers as Python prints an int; other numbers as Python's repr(float). */
  function encodeNumber(value) {
    if (!Number.isFinite(value)) throw new ValueError("Out of range float values are not JSON compliant");
    if (Number.isInteger(value)) {
      if (!Number.isSafeInteger(value)) {
        throw new ValueError("an integer beyond 2**53 is not exact as a number: use a BigInt");
      }
      return String(value === 0 ? 0 : value); // -0 is the int 0
    }
    var sign = value < 0 ? "-" : "";
    var parts = Math.abs(value).toExponential().split("e"); // the shortest round-trip digits
    var digits = parts[0].replace(".", "");
    var exponent = Number(parts[1]);
    var point = exponent + 1; // digits = 0.d1d2… × 10**point
    if (point <= -4 || point > 16) {
      var mantissa = digits[0] + (digits.length > 1 ? "." + digits.slice(1) : "");
      var magnitude = String(Math.abs(exponent));
      return sign + mantissa + "e" + (exponent < 0 ? "-" : "+") + (magnitude.length < 2 ? "0" : "") + magnitude;
    }
    if (point <= 0) return sign + "0." + "0".repeat(-point) + digits;
    if (point >= digits.length) return sign + digits + "0".repeat(point - digits.length) + ".0";
    return sign + digits.slice(0, point) + "." + digits.slice(point);
  }

  scope.relayboxWire = {
    defineError: defineError,
    ValueError: ValueError,
    InvalidPublicKey: InvalidPublicKey,
    KEY_LENGTH: KEY_LENGTH,
    isBytes: isBytes,
    utf8: utf8,
    fromUtf8: fromUtf8,
    concatBytes: concatBytes,
    toBase64: toBase64,
    fromBase64: fromBase64,
    toBase64Url: toBase64Url,
    fromBase64Url: fromBase64Url,
    decodePublicKey: decodePublicKey,
    canonicalJson: canonicalJson,
    canonicalJsonText: canonicalJsonText,
  };
})(self);
