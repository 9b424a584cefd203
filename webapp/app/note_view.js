// A notification as the open web phone shows it in its inbox: the emoji of its tags before its
// title, its message (Markdown rendered safely when it says `markdown`), its other tags, its link,
// its icon's address (a link: nothing is loaded from the sender), and every button. An http
// button's request is sent by the service worker, the only part of the app whose policy lets it
// connect elsewhere (webapp/assets.py).
import "/app/items.js";
import "/app/notes.js";
import { button as uiButton, element } from "/app/ui.js";
import "/static/vendor/markdown-it-14.3.3/markdown-it.min.js";

const notes = globalThis.relayboxNotes;
const LINK_SCHEMES = /^(https?:|mailto:)/i;
const ACTION_WAIT_MS = 15_000;

/**
 * Markdown without raw HTML (markdown-it escapes it), without images (an image would be fetched from
 * the sender), and with links only to http, https and mailto, opened in a new tab without a referrer.
 */
const markdown = globalThis.markdownit({ html: false, linkify: false, typographer: false });
markdown.disable(["image"]);
markdown.validateLink = (url) => LINK_SCHEMES.test(url.trim());
markdown.renderer.rules.link_open = (tokens, index, options, env, self) => {
  tokens[index].attrSet("target", "_blank");
  tokens[index].attrSet("rel", "noopener noreferrer");
  return self.renderToken(tokens, index, options);
};

function link(url, text) {
  const anchor = element("a", "", text);
  anchor.href = url;
  anchor.target = "_blank";
  anchor.rel = "noopener noreferrer";
  return anchor;
}

/** The message: Markdown rendered by the configured markdown-it, or the text as it is. */
function body(note) {
  if (note.markdown !== true) return element("p", "note-text", note.message);
  const rendered = element("div", "note-text markdown");
  rendered.innerHTML = markdown.render(note.message); // escaped by markdown-it: no HTML of the sender's
  return rendered;
}

/** A button of the notification: a view opens its URL; an http one asks the worker to send it. */
function button(action, status) {
  if (action.action !== "http") {
    const view = link(notes.webUrl(action.url) || "#", action.label);
    view.className = "button small";
    view.append(Object.assign(element("span", "", "\u00a0↗"), { ariaHidden: "true" })); // opens a page
    return view;
  }
  return uiButton(action.label, async () => {
    status.textContent = `Sending ${action.label}…`;
    status.textContent = notes.outcome(action.label, await askWorker(action));
  });
}

/** Hand an http button to the service worker; resolves to its {sent, status?, error?}. */
async function askWorker(action) {
  const registration = await navigator.serviceWorker.ready;
  const channel = new MessageChannel();
  const answer = new Promise((resolve) => {
    channel.port1.onmessage = (event) => resolve(event.data);
    setTimeout(() => resolve({ sent: false, error: "the app's worker did not answer" }), ACTION_WAIT_MS);
  });
  registration.active.postMessage({ type: "relaybox-action", action }, [channel.port2]);
  return answer;
}

/** A notification's content: the emoji of its tags and its title (the heading, or null), its
 * message, its other tags, its link and icon, and its buttons. */
export function noteContent(note, emoji) {
  const tags = notes.splitTags(note.tags, emoji);
  const title = [...tags.emoji, ...(note.title ? [note.title] : [])].join(" ");
  const parts = [body(note)];
  if (tags.others.length) {
    const list = element("p", "note-tags");
    list.append(...tags.others.map((tag) => element("span", "tag", tag)));
    parts.push(list);
  }
  const meta = element("p", "note-meta");
  const url = notes.webUrl(note.url);
  if (url) meta.append(link(url, note.url_title || url));
  const icon = notes.webUrl(note.icon);
  if (icon) meta.append(link(icon, "Icon image"));
  if (meta.childNodes.length) parts.push(meta);
  const actions = Array.isArray(note.actions) ? note.actions : [];
  if (actions.length) {
    const status = element("span", "muted note-status");
    status.setAttribute("role", "status");
    const row = element("p", "note-actions");
    row.append(...actions.map((action) => button(action, status)), status);
    parts.push(row);
  }
  return { title: title || null, parts };
}

/** Show a notification as an OS notification (the page is open; the worker does it otherwise). */
export async function notifyOs(note, emoji) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  const registration = await navigator.serviceWorker.ready;
  const { title, options } = notes.shown(note, emoji);
  await registration.showNotification(title, options);
}

/** Close the OS notifications of `tag`. */
export async function closeOs(tag) {
  if (!("serviceWorker" in navigator)) return;
  const registration = await navigator.serviceWorker.ready;
  (await registration.getNotifications({ tag })).forEach((shown) => shown.close());
}
