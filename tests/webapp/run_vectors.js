// Runs the interoperability vectors through the browser wire code and returns what it produced;
// the Python test compares. In a page it imports the ES module (everything); in the service worker
// it uses what sw.js loaded with importScripts (the NaCl part: envelopes and the safety number).
async ({ vectors, inWorker }) => {
  const wire = inWorker ? self.relayboxWire : await import("/static/relaybox-wire.js");
  const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  const raw = (text) => Uint8Array.from(text.match(/../g) || [], (pair) => parseInt(pair, 16));
  // The error a call raised: its name, and whether it is a `family` and a ValueError (as in Python).
  const raised = (run, family) => {
    try {
      run();
      return null;
    } catch (error) {
      return { name: error.name, inFamily: error instanceof family, isValueError: error instanceof wire.ValueError };
    }
  };
  const out = {};

  out.envelope = vectors.envelope.cases.map((c) => ({
    name: c.name,
    sealed: hex(wire.sealEnvelope(raw(c.plaintext), raw(c.sender_secret), raw(c.recipient_public), raw(c.nonce))),
    opened: hex(wire.openEnvelope(raw(c.envelope), raw(c.recipient_secret), raw(c.sender_public))),
    senderPublic: hex(wire.publicKeyOf(raw(c.sender_secret))),
    recipientPublic: hex(wire.publicKeyOf(raw(c.recipient_secret))),
    text: typeof c.plaintext_utf8 === "string" ? wire.fromUtf8(raw(c.plaintext)) : null,
  }));
  out.envelopeNegative = vectors.envelope.negative.map((c) => ({
    name: c.name,
    raised: raised(
      () => wire.openEnvelope(raw(c.envelope), raw(c.recipient_secret), raw(c.sender_public)),
      wire.EnvelopeError,
    ),
  }));
  out.safety = vectors.safety.cases.map((c) => {
    const forward = wire.safetyNumber(raw(c.public_a), raw(c.public_b));
    return {
      name: c.name,
      forward,
      backward: wire.safetyNumber(raw(c.public_b), raw(c.public_a)),
      formatted: wire.formatSafetyNumber(forward),
    };
  });
  if (inWorker) return out;

  out.derivation = vectors.chunks.key_derivation.map((c) => ({
    shared: hex(wire.sharedSecret(raw(c.my_secret), raw(c.their_public))),
    key: hex(wire.deriveChunkKey(raw(c.my_secret), raw(c.their_public), c.transfer_id)),
  }));
  out.transfers = vectors.chunks.transfers.map((t) =>
    t.files.map((f) => {
      const cipher = new wire.ChunkCipher(raw(t.key), raw(t.nonce_prefix), t.transfer_id, f.file_id);
      return {
        chunks: f.chunks.map((c) => ({
          nonce: hex(wire.chunkNonce(raw(t.nonce_prefix), c.index)),
          associatedData: hex(wire.associatedData(t.transfer_id, f.file_id, c.index, c.is_final)),
          sealed: hex(cipher.seal(c.index, raw(c.plaintext), c.is_final)),
          opened: hex(cipher.open(c.index, raw(c.ciphertext), c.is_final)),
        })),
        sealedFile: cipher.sealFile(raw(f.plaintext), f.first_index, f.chunk_size).map(hex),
        openedFile: hex(cipher.openFile(f.chunks.map((c) => raw(c.ciphertext)), f.first_index)),
      };
    }),
  );
  out.chunkNegative = vectors.chunks.negative.map((c) => ({
    name: c.name,
    raised: raised(() =>
      new wire.ChunkCipher(raw(c.key), raw(c.nonce_prefix), c.transfer_id, c.file_id).open(
        c.index,
        raw(c.ciphertext),
        c.is_final,
      ),
      wire.ChunkError,
    ),
  }));
  return out;
}
