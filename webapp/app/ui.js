// The building blocks every view of the web app uses: elements, buttons whose failures show as a
// sentence (never JSON, never a raw exception), and errors shown next to the field they concern.
import { ApiError } from "/app/api.js";

export const $ = (id) => document.getElementById(id);

export function element(tag, className, text) {
  const made = document.createElement(tag);
  if (className) made.className = className;
  if (text !== undefined) made.textContent = text;
  return made;
}

/** What went wrong, as a sentence a person can act on. */
export function sentence(error) {
  if (error instanceof ApiError) {
    if (error.retryAfter) return `${error.message} Try again in ${error.retryAfter} s.`;
    return error.message;
  }
  return `Something went wrong: ${error && error.message ? error.message : String(error)}`;
}

/** Show a problem that belongs to no field, at the top of the page, until dismissed. */
export function problem(error) {
  showProblem(sentence(error));
}

/** Show `text` where `problem` does. */
export function showProblem(text) {
  $("problem-text").textContent = text;
  $("problem").hidden = false;
}

export function clearProblem() {
  $("problem").hidden = true;
}

/** An error next to its field: the field is marked invalid and the message announced. */
export function fieldError(field, text) {
  const box = $(field.getAttribute("aria-describedby").split(" ").find((id) => id.endsWith("-error")));
  box.textContent = text || "";
  if (text) field.setAttribute("aria-invalid", "true");
  else field.removeAttribute("aria-invalid");
}

/** An event handler that shows its failure instead of losing it. */
export function guarded(action) {
  return async (event) => {
    if (event && event.type === "submit") event.preventDefault();
    clearProblem();
    try {
      await action(event);
    } catch (error) {
      problem(error);
    }
  };
}

/** A button that runs `onClick` (guarded), disabled while it runs. */
export function button(label, onClick, className = "button small") {
  const made = element("button", className, label);
  made.type = "button";
  made.addEventListener(
    "click",
    guarded(async (event) => {
      made.disabled = true;
      try {
        await onClick(event);
      } finally {
        made.disabled = false;
      }
    }),
  );
  return made;
}

/** Copy the text of `source` (an element) and say in `status` whether it worked; where the
 * browser refuses, select it for copying by hand. `what` names it ("the token"). */
export async function copyText(source, status, what) {
  try {
    await navigator.clipboard.writeText(source.textContent);
    status.className = "copy-status";
    status.textContent = "Copied.";
  } catch {
    getSelection().selectAllChildren(source);
    status.className = "copy-status failed";
    status.textContent = `This browser did not allow copying: ${what} is selected, copy it by hand.`;
  }
}

/** A time as this phone shows it: "14:05" today, else "12 Mar 14:05". */
export function when(ms) {
  const at = new Date(ms);
  const clock = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (at.toDateString() === new Date().toDateString()) return clock;
  return `${at.toLocaleDateString([], { day: "numeric", month: "short" })} ${clock}`;
}

/** A <time> element for `ms`. */
export function timeElement(ms) {
  const shown = element("time", "entry-time", when(ms));
  shown.dateTime = new Date(ms).toISOString();
  return shown;
}

/** A placeholder line for an empty list. */
export function emptyRow(text) {
  return element("li", "empty-row", text);
}

/** For a list read again while an older read may still be in flight (a view opened, then a
 * Revoke): each read takes a ticket, and only a read no newer one has followed draws. */
export function newestReads() {
  let latest = 0;
  return () => {
    const ticket = ++latest;
    return () => ticket === latest;
  };
}
