/*
 * Answering a question with this browser's stored credential: a choice, a typed reply, or both, as
 * the question allows; and acknowledging an urgent notification. A typed reply is sealed to the
 * server's key as an `interaction_text` payload (docs/protocol.md "Typed replies"), with the
 * vendored wire code (self.relayboxWire). A classic script: the page imports it (the question's
 * buttons and text box, an urgent alert's Acknowledge button) and the service worker loads it with
 * importScripts (a notification's action buttons).
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

  /** POST with the stored device credential; resolves to {status, body}. `makeBody` (optional)
   * builds the JSON body from the identity. */
  function post(path, makeBody) {
    return scope.relayboxStore.load().then(function (identity) {
      var headers = { Authorization: "Bearer " + identity.token };
      var init = { method: "POST", headers: headers };
      if (makeBody) {
        headers["Content-Type"] = "application/json";
        init.body = JSON.stringify(makeBody(identity));
      }
      return fetch(path, init);
    }).then(function (response) {
      return response.text().then(function (text) {
        var body = null;
        try {
          body = JSON.parse(text);
        } catch (error) {
          body = null; // a proxy's HTML page, say: the status alone tells
        }
        return { status: response.status, body: body };
      });
    });
  }

  /** POST the answer (409 once it was answered elsewhere or expired). */
  function answerQuestion(interactionId, choiceIndex, text) {
    return post("/v1/interactions/" + encodeURIComponent(interactionId) + "/answer", function (identity) {
      return answerBody(identity, interactionId, choiceIndex, text);
    });
  }

  /**
   * Acknowledge an urgent notification (docs/protocol.md "Urgent until acknowledged"): it stops
   * repeating on every device. body.status says acknowledged (here, or by another device first),
   * cancelled or expired.
   */
  function acknowledge(receipt) {
    return post("/v1/receipts/" + encodeURIComponent(receipt) + "/acknowledge");
  }

  scope.relayboxAnswer = answerQuestion;
  scope.relayboxAnswerBody = answerBody;
  scope.relayboxAcknowledge = acknowledge;
})(typeof self !== "undefined" ? self : globalThis);
