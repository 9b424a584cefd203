// The web app: on first open it asks what this browser is; as the phone it pairs computers,
// confirms assistants' codes, manages tokens and grants, and shows what arrives (on the page while
// it is open, as notifications through the service worker otherwise). Every failure is shown as a
// sentence, never as JSON.
import { ApiError, call } from "/app/api.js";
import { confirmCode, curlLine, grants, openFrame, registerPhone, reportBuild, tokens } from "/app/phone.js";
import { operation, push, question, schedule } from "/app/phone_ops.js";
import { resumeUrgent, urgent } from "/app/urgent.js";
import { describe, safetyNumberWithPhone, startPairing, waitForPhone } from "/app/computer.js";
import { clearNotification, showNotification } from "/app/inbox.js";
import "/app/store.js";
import { follow } from "/app/stream.js";
import { fromBase64Url } from "/static/relaybox-wire.js";

const store = globalThis.relayboxStore;
const $ = (id) => document.getElementById(id);

function problem(error) {
  const text = error instanceof ApiError ? error.message : `Something went wrong: ${error.message}`;
  $("problem").textContent = text;
  $("problem").hidden = false;
}

function clearProblem() {
  $("problem").hidden = true;
}

function missingFeatures() {
  const needs = [
    ["service workers", "serviceWorker" in navigator],
    ["web push", "PushManager" in window],
    ["notifications", "Notification" in window],
  ];
  return needs.filter(([, present]) => !present).map(([name]) => name);
}

function guarded(action) {
  return async (event) => {
    if (event) event.preventDefault();
    clearProblem();
    try {
      await action(event);
    } catch (error) {
      problem(error);
    }
  };
}

function item(text, buttonLabel, onClick) {
  const li = document.createElement("li");
  li.append(document.createTextNode(text + " "));
  if (buttonLabel) li.append(ui.button(buttonLabel, onClick));
  return li;
}

async function renderTokens(identity) {
  const listed = (await tokens.list(identity)).filter((token) => !token.revoked_at);
  $("token-list").replaceChildren(
    ...listed.map((token) =>
      item(`${token.label}${token.scope ? ` (${token.scope})` : ""}`, `Revoke ${token.label}`, async () => {
        await tokens.revoke(identity, token.id);
        await renderTokens(identity);
      }),
    ),
  );
}

async function renderGrants(identity) {
  const listed = await grants.list(identity);
  $("grant-list").replaceChildren(
    ...(listed.length
      ? listed.map((grant) =>
          item(`${grant.client_name}: ${grant.scopes.join(", ")}`, `Disconnect ${grant.client_name}`, async () => {
            await grants.revoke(identity, grant.id);
            await renderGrants(identity);
          }),
        )
      : [item("No assistant is connected.")]),
  );
}

async function notify(note) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  const registration = await navigator.serviceWorker.ready;
  const options = {
    body: note.message,
    tag: note.id,
    requireInteraction: Boolean(note.urgent),
    data: { url: note.url || "/app/" },
  };
  if (note.receipt) { // an urgent alert: each repeat alerts anew, and the service worker acknowledges
    Object.assign(options, { renotify: true, actions: [{ action: "ack", title: "Acknowledge" }] });
    options.data.receipt = note.receipt;
  }
  await registration.showNotification(note.title || "relaybox", options);
}

/** What the operations use to show themselves on the page. */
const ui = {
  entry(list, text, extras = []) {
    const li = document.createElement("li");
    li.append(document.createTextNode(text + " "), ...extras);
    $(list).prepend(li);
    return li;
  },
  button(label, onClick) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "button small";
    button.textContent = label;
    button.addEventListener("click", guarded(onClick));
    return button;
  },
  status(entry, text) {
    entry.append(Object.assign(document.createElement("span"), { className: "muted", textContent: ` ${text}` }));
  },
  notify: (note) => notify(note).catch(problem),
};

async function onFrame(identity, frame) {
  if (frame.event === "envelope") {
    const payload = openFrame(identity, frame.data);
    if (payload.type === "notification") {
      if (payload.receipt) { // urgent until acknowledged: its alerts notify, again and again
        await showNotification(payload, ui, { alert: false });
        await urgent(payload, ui);
      } else {
        await showNotification(payload, ui);
      }
    } else if (payload.type === "notification_clear") {
      await clearNotification(String(payload.sequence_id));
    } else if (payload.type === "interaction_request") {
      question(identity, payload, ui);
    } else if (!(await operation(identity, payload, ui))) {
      ui.entry("inbox", payload.unreadable ? `A ${payload.type} ${payload.unreadable}` : `A ${payload.type} arrived.`);
    }
  } else if (frame.event === "push") {
    await push(identity, frame.data, ui);
  } else if (frame.event === "token_update") {
    await renderTokens(identity);
  }
  if (frame.seq) await store.update({ lastSeq: frame.seq });
}

async function enablePush(identity) {
  const permission = await Notification.requestPermission();
  if (permission !== "granted") {
    $("push-state").textContent = "Notifications are blocked for this site; allow them in the browser's settings.";
    return;
  }
  const { application_server_key: key } = await call("GET", "/v1/push/web-key");
  const registration = await navigator.serviceWorker.ready;
  let subscription;
  try {
    subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: fromBase64Url(key) });
  } catch (error) {
    $("push-state").textContent = `This browser could not subscribe to push (${error.message}). Notifications still show while this page is open.`;
    return;
  }
  const { keys } = subscription.toJSON();
  const body = { web_push: { endpoint: subscription.endpoint, p256dh: keys.p256dh, auth: keys.auth } };
  await call("PATCH", "/v1/devices/me", { token: identity.token, body });
  $("push-state").textContent = "Notifications are on, also when this page is closed.";
}

async function showPhone(identity) {
  $("setup").hidden = true;
  $("phone").hidden = false;
  $("phone-name").textContent = identity.name;
  $("code-form").addEventListener("submit", guarded(async () => {
    const code = $("code").value.trim();
    const result = await confirmCode(identity, code);
    const box = $("code-result");
    if (result.intent === "connector") {
      box.textContent = `Confirmed for ${result.clientName}. Go back to its page to choose what it may do.`;
      await renderGrants(identity);
    } else {
      box.replaceChildren(
        document.createTextNode(`Paired with ${result.name}. Compare this safety number with the one the computer shows:`),
        Object.assign(document.createElement("pre"), { id: "safety-number", className: "wrap", textContent: result.safetyNumber }),
      );
    }
    $("code").value = "";
  }));
  $("token-form").addEventListener("submit", guarded(async () => {
    const created = await tokens.create(identity, $("token-label").value.trim(), $("token-ring").checked);
    $("new-token-value").textContent = created.token;
    $("curl-line").textContent = curlLine(created.token);
    $("new-token").hidden = false;
    await renderTokens(identity);
  }));
  $("copy-token").addEventListener("click", guarded(async () => {
    await navigator.clipboard.writeText($("new-token-value").textContent);
  }));
  $("enable-push").addEventListener("click", guarded(() => enablePush(identity)));
  await Promise.all([renderTokens(identity), renderGrants(identity), reportBuild(identity)]);
  Object.values(identity.reminders || {}).forEach((reminder) => schedule(reminder, ui));
  resumeUrgent(identity, ui);
  follow({
    token: identity.token,
    since: identity.lastSeq || 0,
    onFrame: (frame) => onFrame(identity, frame).catch(problem),
    onState: (state) => ($("stream-state").textContent = state),
  });
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
        ui.entry("received", describe(identity, frame.data.from, openFrame(identity, frame.data)));
      }
      if (frame.seq) await store.update({ lastSeq: frame.seq });
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
      : error.message;
  }
}

async function start() {
  const missing = missingFeatures();
  $("support").textContent = missing.length
    ? `This browser lacks ${missing.join(", ")}. On iPhone and iPad, add this page to the Home Screen first.`
    : "This browser has everything the web app needs.";
  if ("serviceWorker" in navigator) {
    await navigator.serviceWorker.register("/app/sw.js", { scope: "/app/" });
  }
  const identity = await store.load();
  if (identity && identity.role === "phone") return showPhone(identity);
  if (identity && identity.role === "computer") return showComputer(identity);
  $("setup").hidden = false;
  $("choose-computer").addEventListener("click", guarded(async () => {
    const name = $("device-name").value.trim();
    await pairAsComputer(!name || name === "My phone" ? "Browser" : name);
  }));
  $("phone-form").addEventListener("submit", guarded(async () => {
    const name = $("device-name").value.trim() || "My phone";
    await showPhone(await registerPhone(name));
  }));
}

start().catch(problem);
