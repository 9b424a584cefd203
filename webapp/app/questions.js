// A question in the open web phone's inbox: one button per choice and, where the asker allowed it
// (`text_max_chars`), a text box whose words go with the tapped choice (or, with no choices, are
// the answer, sent with its own button). The first answer on any device wins; once it is answered
// (here or elsewhere: interaction_closed) or expired, the entry says so and its controls go.
import "/app/answer.js";
import { ApiError, call } from "/app/api.js";
import "/app/items.js";
import "/app/store.js";
import { button, element, fieldError } from "/app/ui.js";

const store = globalThis.relayboxStore;
const items = globalThis.relayboxItems;

/** What a closed question's entry says. */
export function closedLine(entry) {
  const { payload } = entry;
  const choice = Number.isInteger(entry.choice) ? payload.choices[entry.choice] : null;
  if (entry.state === "expired") return "Expired without an answer.";
  if (entry.state !== "answered") return "Already answered or expired.";
  if (entry.mine) {
    if (entry.typed) return choice ? `Answered: ${choice}, with your reply.` : "Answered with your reply.";
    return `Answered: ${choice}.`;
  }
  const where = entry.by && entry.by.name ? ` on ${entry.by.name}` : " elsewhere";
  return choice ? `Answered${where}: ${choice}.` : `Answered${where}.`;
}

/** True once an open question's time is up (it is then shown, and kept, as expired). */
export function expired(entry) {
  return entry.state === "open" && entry.payload.expires_at * 1000 <= Date.now();
}

/** A labelled text box for a typed reply of at most `text_max_chars` characters. */
function replyBox(payload) {
  const field = element("textarea");
  field.id = `reply-${payload.id}`;
  field.maxLength = payload.text_max_chars;
  field.rows = 2;
  field.setAttribute("aria-describedby", `reply-${payload.id}-error`);
  const label = element("label", "", payload.choices.length ? "Add a reply (optional)" : "Your reply");
  label.htmlFor = field.id;
  const error = element("p", "field-error");
  error.id = `reply-${payload.id}-error`;
  error.setAttribute("role", "alert");
  const box = element("div", "app-form reply");
  box.append(label, field, error);
  return { field, box };
}

/** The parts of a question's entry: its text, then its controls while open, else how it closed.
 * `changed()` redraws the inbox after this phone answered. */
export function questionParts(identity, entry, changed) {
  const { payload } = entry;
  const parts = [element("p", "question-text", payload.question)];
  if (entry.state !== "open" || expired(entry)) {
    parts.push(element("p", "closed-line", closedLine(expired(entry) ? { ...entry, state: "expired" } : entry)));
    return parts;
  }
  const reply = Number.isInteger(payload.text_max_chars) ? replyBox(payload) : null;
  const status = element("p", "muted answer-status");
  status.setAttribute("role", "status");
  const controls = [];
  const answer = async (index) => {
    const text = reply ? reply.field.value.trim() : "";
    if (index === null && !text) {
      fieldError(reply.field, "Type a reply first.");
      reply.field.focus();
      return;
    }
    if (reply) fieldError(reply.field, "");
    controls.forEach((each) => (each.disabled = true));
    status.textContent = "Sending your answer…";
    let closed;
    try {
      const body = globalThis.relayboxAnswerBody(identity, payload.id, index, text);
      await call("POST", `/v1/interactions/${encodeURIComponent(payload.id)}/answer`, { token: identity.token, body });
      const by = { device_id: identity.deviceId, name: identity.name };
      closed = { state: "answered", by, choice: index, mine: true, typed: Boolean(text) };
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 409)) {
        status.textContent = `Not sent: ${error.message}`;
        controls.forEach((each) => (each.disabled = false));
        return;
      }
      closed = { state: error.code === "interaction_expired" ? "expired" : "answered" };
    }
    await store.take([items.closeQuestion(payload.id, closed)]);
    await changed();
  };
  const row = element("div", "choices");
  payload.choices.forEach((choice, index) => {
    const tap = button(choice, () => answer(index), "button choice");
    controls.push(tap);
    row.append(tap);
  });
  if (row.childNodes.length) parts.push(row);
  if (reply) {
    controls.push(reply.field);
    if (!payload.choices.length) {
      const send = button("Send reply", () => answer(null), "button primary");
      controls.push(send);
      reply.box.append(send);
    }
    parts.push(reply.box);
  }
  parts.push(status);
  return parts;
}
