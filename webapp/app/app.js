// The web app: on first open it asks what this browser is; as the phone it keeps an inbox of what
// arrives and has its settings views (phone_view.js), as a computer it shows its pairing and what
// the phone sends it. Every failure is shown as a sentence, never as JSON.
import { ApiError } from "/app/api.js";
import { describe, safetyNumberWithPhone, startPairing, waitForPhone } from "/app/computer.js";
import { takeInviteFromLink } from "/app/invites.js";
import { openFrame } from "/app/phone.js";
import { showPhone } from "/app/phone_view.js";
import { offerPhoneSetUp } from "/app/setup.js";
import "/app/store.js";
import { follow } from "/app/stream.js";
import { $, clearProblem, element, guarded, problem, sentence, showProblem } from "/app/ui.js";

const store = globalThis.relayboxStore;
const ALREADY_SET_UP = "This browser is already set up here, so the invite link was not used: open it on the new phone.";

function missingFeatures() {
  const needs = [
    ["service workers", "serviceWorker" in navigator],
    ["web push", "PushManager" in window],
    ["notifications", "Notification" in window],
  ];
  return needs.filter(([, present]) => !present).map(([name]) => name);
}

async function showComputer(identity) {
  $("setup").hidden = true;
  $("computer").hidden = false;
  $("pairing").hidden = true;
  $("paired").hidden = false;
  $("phone-of-computer").textContent = identity.phone.name;
  $("computer-safety").textContent = safetyNumberWithPhone(identity);
  follow({
    token: identity.token,
    since: identity.lastSeq || 0,
    onFrame: async (frame) => {
      if (frame.event === "envelope" || frame.event === "token_update") {
        const payload = openFrame(identity, frame.data);
        if (payload.type !== "interaction_closed") {
          $("received").prepend(element("li", "", describe(identity, frame.data.from, payload)));
        }
      }
      if (frame.seq) await store.take([], frame.seq);
    },
    onState: (state) => ($("computer-stream").textContent = state),
  });
}

async function pairAsComputer(name) {
  const started = await startPairing(name);
  $("setup").hidden = true;
  $("computer").hidden = false;
  $("pairing").hidden = false;
  $("pair-code").textContent = started.code;
  try {
    await showComputer(await waitForPhone(started.identity));
  } catch (error) {
    await store.forget();
    $("pair-state").textContent = error instanceof ApiError && error.status === 410
      ? "The code expired before the phone confirmed it. Reload the page to start again."
      : sentence(error);
  }
}

async function start() {
  $("problem-close").addEventListener("click", clearProblem);
  const missing = missingFeatures();
  $("support").textContent = missing.length
    ? `This browser lacks ${missing.join(", ")}. On iPhone and iPad, add this page to the Home Screen first.`
    : "This browser has everything the web app needs.";
  $("support").classList.toggle("visually-hidden", missing.length === 0);
  if ("serviceWorker" in navigator) {
    await navigator.serviceWorker.register("/app/sw.js", { scope: "/app/" });
  }
  const invite = takeInviteFromLink();
  const identity = await store.load();
  if (identity) {
    await (identity.role === "phone" ? showPhone(identity) : showComputer(identity));
    if (invite) showProblem(ALREADY_SET_UP); // once the views are drawn, which clears problems
    return;
  }
  $("setup").hidden = false;
  const nameField = $("device-name");
  $("choose-computer").addEventListener("click", guarded(async () => {
    const name = nameField.value.trim();
    await pairAsComputer(!name || name === "My phone" ? "Browser" : name);
  }));
  $("phone-form").addEventListener("submit", guarded(offerPhoneSetUp(invite)));
}

start().catch(problem);
