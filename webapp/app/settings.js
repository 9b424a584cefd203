// The web phone's other views: Pair (a computer's pairing code or an assistant's consent code,
// and the devices paired), Tokens (create, copy, revoke), Assistants (the connector grants) and
// Settings (notifications, sound, invites (invites.js), this phone). Each view shows the state it
// is about: the lists are read again whenever the view opens, the token list on every token
// change, the assistants list while a confirmed consent waits for the person's choice on the
// assistant's page, and the notification status from the browser and the server whenever the
// view opens.
import { blocked, sound, unlock } from "/app/alarm.js";
import { ApiError, call } from "/app/api.js";
import { initInvites } from "/app/invites.js";
import { confirmCode, curlLine, grants, tokens } from "/app/phone.js";
import { $, button, copyText, element, emptyRow, fieldError, guarded, newestReads, sentence } from "/app/ui.js";
import { fromBase64Url } from "/static/relaybox-wire.js";
import "/app/store.js";

const store = globalThis.relayboxStore;

const CONSENT_WATCH_MS = 10 * 60_000; // how long a confirmed consent may wait for its Allow
const CONSENT_POLL_MS = 2_000;
let consentWatch = null;
const tokenRead = newestReads();
const grantRead = newestReads();

function row(text, action) {
  const li = element("li", "row");
  li.append(element("span", "row-text", text));
  if (action) li.append(action);
  return li;
}

export async function drawTokens(identity) {
  const newest = tokenRead();
  const listed = (await tokens.list(identity)).filter((token) => !token.revoked_at);
  if (!newest()) return; // a newer read (after a Revoke or a new token) draws instead
  $("token-list").replaceChildren(
    ...(listed.length
      ? listed.map((token) =>
          row(
            `${token.label}${token.scope ? ` (${token.scope})` : ""}`,
            button(`Revoke ${token.label}`, async () => {
              await tokens.revoke(identity, token.id);
              await drawTokens(identity);
            }),
          ),
        )
      : [emptyRow("No sender tokens yet. Create one above for your first script.")]),
  );
}

/** The assistants list; resolves to how many are connected. */
export async function drawGrants(identity) {
  const newest = grantRead();
  const listed = await grants.list(identity);
  if (!newest()) return listed.length; // a newer read (after a Disconnect) draws instead
  const origin = location.origin;
  $("grant-list").replaceChildren(
    ...(listed.length
      ? listed.map((grant) =>
          row(
            `${grant.client_name}: ${grant.scopes.join(", ")}`,
            button(`Disconnect ${grant.client_name}`, async () => {
              await grants.revoke(identity, grant.id);
              await drawGrants(identity);
            }),
          ),
        )
      : [emptyRow(`No assistant is connected. Add ${origin}/mcp as a connector in your assistant; it shows a six-digit code to enter under Pair.`)]),
  );
  return listed.length;
}

/** After a consent code: the grant appears once the person chooses Allow on the assistant's
 * page, so the list is read again every few seconds until it changes (at most CONSENT_WATCH_MS). */
async function watchConsent(identity) {
  clearTimeout(consentWatch);
  const before = await drawGrants(identity);
  const until = Date.now() + CONSENT_WATCH_MS;
  const again = async () => {
    try {
      if ((await drawGrants(identity)) !== before || Date.now() > until) return;
    } catch {
      if (Date.now() > until) return;
    }
    consentWatch = setTimeout(again, CONSENT_POLL_MS);
  };
  consentWatch = setTimeout(again, CONSENT_POLL_MS);
}

function drawPeers(identity) {
  const peers = Object.values(identity.peers || {});
  $("peer-list").replaceChildren(
    ...(peers.length ? peers.map((peer) => row(peer.name)) : [emptyRow("No computer is paired yet.")]),
  );
}

/** Refuse codes for `seconds` after too many wrong ones, counting down beside the field. */
function waitBeforeCodes(seconds) {
  const field = $("code");
  const submit = $("code-submit");
  const end = Date.now() + seconds * 1000;
  submit.disabled = true;
  const tick = () => {
    const left = Math.ceil((end - Date.now()) / 1000);
    if (left <= 0) {
      submit.disabled = false;
      fieldError(field, "");
      return;
    }
    fieldError(field, `Too many wrong codes. Try again in ${left} s.`);
    setTimeout(tick, 1000);
  };
  tick();
}

function initPair(identity) {
  drawPeers(identity);
  $("code-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const field = $("code");
    const code = field.value.trim();
    if (!/^[0-9]{6}$/.test(code)) {
      fieldError(field, "Type the six digits the computer or the assistant's page shows.");
      return;
    }
    fieldError(field, "");
    let result;
    try {
      result = await confirmCode(identity, code);
    } catch (error) {
      if (error instanceof ApiError && error.status === 429) waitBeforeCodes(error.retryAfter);
      else fieldError(field, sentence(error));
      return;
    }
    field.value = "";
    const box = $("code-result");
    if (result.intent === "connector") {
      box.replaceChildren(element("p", "ok", `Confirmed for ${result.clientName}. Go back to its page to choose what it may do; it then shows under Assistants.`));
      await watchConsent(identity);
    } else {
      drawPeers(identity);
      const number = element("pre", "wrap", result.safetyNumber);
      number.id = "safety-number";
      box.replaceChildren(element("p", "ok", `Paired with ${result.name}. Compare this safety number with the one the computer shows:`), number);
    }
  });
}

function initTokens(identity) {
  $("token-form").addEventListener("submit", guarded(async () => {
    const field = $("token-label");
    const label = field.value.trim();
    if (!label) {
      fieldError(field, "Give the token a label, such as the script's name.");
      return;
    }
    fieldError(field, "");
    const created = await tokens.create(identity, label, $("token-ring").checked);
    $("new-token-value").textContent = created.token;
    $("curl-line").textContent = curlLine(created.token);
    $("copy-status").textContent = "";
    $("new-token").hidden = false;
    await drawTokens(identity);
  }));
  $("copy-token").addEventListener("click", () => copyText($("new-token-value"), $("copy-status"), "the token"));
}

/** The notification status, from this browser (permission, subscription) and the server. */
export async function drawPush(identity) {
  const state = $("push-state");
  const enable = $("enable-push");
  let text;
  let on = false;
  if (!("Notification" in window) || !("PushManager" in window)) {
    text = "This browser cannot show notifications while the page is closed. On iPhone and iPad, add this page to the Home Screen first.";
  } else if (Notification.permission === "denied") {
    text = "Notifications are blocked for this site; allow them in the browser's settings.";
  } else {
    const registration = await navigator.serviceWorker.ready;
    const subscription = await registration.pushManager.getSubscription();
    const device = await call("GET", "/v1/devices/me", { token: identity.token });
    on = Notification.permission === "granted" && Boolean(subscription) && device.push === "web_push";
    if (on) text = "Notifications are on, also when this page is closed.";
    else text = identity.pushRefusal || "Notifications are off: you see what arrives only while this page is open.";
  }
  state.textContent = text;
  enable.hidden = on || Notification.permission === "denied";
  $("push-banner").hidden = on;
}

async function enablePush(identity) {
  const permission = await Notification.requestPermission();
  if (permission !== "granted") return drawPush(identity);
  const { application_server_key: key } = await call("GET", "/v1/push/web-key");
  const registration = await navigator.serviceWorker.ready;
  let subscription;
  try {
    subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: fromBase64Url(key) });
  } catch (error) {
    $("push-state").textContent = `This browser could not subscribe to push (${error.message}). Notifications still show while this page is open.`;
    return undefined;
  }
  const { keys } = subscription.toJSON();
  const body = { web_push: { endpoint: subscription.endpoint, p256dh: keys.p256dh, auth: keys.auth } };
  try {
    await call("PATCH", "/v1/devices/me", { token: identity.token, body });
    await keepPushRefusal(identity, "");
  } catch (error) {
    if (!(error instanceof ApiError && error.code === "push_endpoint_not_allowed")) throw error;
    await keepPushRefusal(identity, refusedPushService(subscription.endpoint));
    await subscription.unsubscribe().catch(() => {}); // a subscription nothing pushes to
  }
  return drawPush(identity);
}

/** The server's refusal of this browser's push service, said in Settings until a try succeeds,
 * across reloads (kept with the identity). */
async function keepPushRefusal(identity, text) {
  identity.pushRefusal = text;
  await store.update({ pushRefusal: text });
}

/** Why notifications stay off when the server refuses this browser's push service: its outbound
 * policy sends only to the push services browsers commonly use, unless its operator adds more. */
function refusedPushService(endpoint) {
  let host = "";
  try {
    host = new URL(endpoint).hostname;
  } catch {
    host = "";
  }
  const service = host ? `This browser's push service (${host})` : "This browser's push service";
  return `${service} is not one this server sends to: it sends only to the push services browsers commonly use. ` +
    `Its operator can add this one (RELAYBOX_WEB_PUSH_HOSTS). Until then you see what arrives only while this page is open.`;
}

/** Whether sound can play, here and in the inbox's banner. */
export function drawSound() {
  const off = blocked();
  $("sound-banner").hidden = !off;
  $("sound-state").textContent = off
    ? "Sound and vibration are off until you tap this page once (the browser's rule)."
    : "Alarms sound on this phone while this page is open.";
}

function initSettings(identity, build) {
  $("enable-push").addEventListener("click", guarded(() => enablePush(identity)));
  $("enable-sound").addEventListener("click", guarded(async () => {
    await unlock();
    drawSound();
  }));
  $("test-sound").addEventListener("click", guarded(async () => {
    await unlock();
    drawSound();
    sound(1);
  }));
  $("about-name").textContent = identity.name;
  $("about-server").textContent = location.origin;
  $("about-build").textContent = String(build);
}

/** Wire the views; `opened(view)` then reads again what that view shows. */
export function initViews(identity, build) {
  initPair(identity);
  initTokens(identity);
  initSettings(identity, build);
  initInvites(identity);
  drawPush(identity).catch(() => {}); // the inbox's banner says whether notifications are on
  return async (view) => {
    if (view === "tokens") await drawTokens(identity);
    else if (view === "assistants") await drawGrants(identity);
    else if (view === "settings") await drawPush(identity);
    drawSound();
  };
}
