/*
 * Answering a question with this browser's stored credential: a choice, a typed reply, or both, as
 * the question allows. A typed reply is sealed to the server's key as an `interaction_text` payload
 * (docs/protocol.md "Typed replies"), with the vendored wire code (self.relayboxWire). A classic
 * script: the page imports it (the question's buttons and text box) and the service worker loads
 * it with importScripts (a notification's action buttons).
 */
(function (scope) {
  "use strict";

  /** The answer's JSON body: `choice_index` unless null, `sealed_text` when `text` is not empty. */
  function answerBody(identity, interactionId, choiceIndex, text) {
    var body = {};
    if (choiceIndex !== null && choiceIndex !== undefined) body.choice_index = choiceIndex;
    if (text) {
      var wire = scope.relayboxWire;
      var payload = wire.canonicalJson({ type: "interaction_text", id: interactionId, text: text });
      body.sealed_text = wire.toBase64(wire.sealEnvelope(payload, identity.secretKey, identity.serverPublicKey));
    }
    return body;
  }

  /** POST the answer; resolves to {status, body} (409 once it was answered elsewhere or expired). */
  function answerQuestion(interactionId, choiceIndex, text) {
    return scope.relayboxStore.load().then(function (identity) {
      return fetch("/v1/interactions/" + encodeURIComponent(interactionId) + "/answer", {
        method: "POST",
        headers: { Authorization: "Bearer " + identity.token, "Content-Type": "application/json" },
        body: JSON.stringify(answerBody(identity, interactionId, choiceIndex, text)),
      });
    }).then(function (response) {
      return response.json().then(function (body) {
        return { status: response.status, body: body };
      });
    });
  }

  scope.relayboxAnswer = answerQuestion;
  scope.relayboxAnswerBody = answerBody;
})(typeof self !== "undefined" ? self : globalThis);
