// The web app's shell: registers the service worker and says whether this browser has what the
// app needs. The app's own flows (phone or computer setup, pairing, web push) build on this.

const support = document.getElementById("support");

function missingFeatures() {
  const needs = [
    ["service workers", "serviceWorker" in navigator],
    ["web push", "PushManager" in window],
    ["notifications", "Notification" in window],
  ];
  return needs.filter(([, present]) => !present).map(([name]) => name);
}

async function start() {
  const missing = missingFeatures();
  if ("serviceWorker" in navigator) {
    try {
      await navigator.serviceWorker.register("/app/sw.js", { scope: "/app/" });
    } catch (error) {
      support.textContent = `The background worker could not start: ${error.message}`;
      return;
    }
  }
  support.textContent = missing.length
    ? `This browser lacks ${missing.join(", ")}. On iPhone and iPad, add this page to the Home Screen first.`
    : "This browser has everything the web app needs.";
}

start();
