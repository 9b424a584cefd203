/*
 * Answering a question from its notification's action button (the service worker) with this
 * browser's stored credential. A classic script: the worker loads it with importScripts.
 */
(function (scope) {
  "use strict";

  /** POST the choice; resolves to {status, body} (409 once it was answered elsewhere or expired). */
  function answerQuestion(interactionId, choiceIndex) {
    return scope.relayboxStore.load().then(function (identity) {
      return fetch("/v1/interactions/" + encodeURIComponent(interactionId) + "/answer", {
        method: "POST",
        headers: { Authorization: "Bearer " + identity.token, "Content-Type": "application/json" },
        body: JSON.stringify({ choice_index: choiceIndex }),
      });
    }).then(function (response) {
      return response.json().then(function (body) {
        return { status: response.status, body: body };
      });
    });
  }

  scope.relayboxAnswer = answerQuestion;
})(typeof self !== "undefined" ? self : globalThis);
