// Invites, both ends: Settings' "Invite someone" (this phone mints a single-use invite with its
// device credential, shown as a link that opens the web app with it filled in) and what set-up
// reads from such a link. The invite travels in the link's #fragment, which browsers never send,
// so it reaches no server's or proxy's log.
import { ApiError, call } from "/app/api.js";
import { $, copyText, guarded, sentence, when } from "/app/ui.js";

const LINK_PREFIX = "#invite=";
const INVITE = /rbi_[A-Za-z0-9_-]{43}/;

/** The link that opens this server's web app with `invite` filled in. */
export function inviteLink(invite) {
  return `${location.origin}/app/${LINK_PREFIX}${invite}`;
}

/** The invite in this page's address (an invite link), taken out of the address and its history
 * entry so it is not kept or shared with the page; "" when there is none. */
export function takeInviteFromLink() {
  if (!location.hash.startsWith(LINK_PREFIX)) return "";
  const invite = decodeURIComponent(location.hash.slice(LINK_PREFIX.length)).trim();
  history.replaceState(null, "", location.pathname + location.search);
  return invite;
}

/** What a person typed or pasted as the invite: the invite itself, or a whole invite link. */
export function inviteIn(text) {
  const found = text.match(INVITE);
  return found ? found[0] : text.trim();
}

/** Why no invite could be made, as a sentence a person can act on. */
function refusal(error) {
  if (error instanceof ApiError && error.code === "limit_reached") {
    const max = error.details.max || 20;
    return `This phone already has ${max} invites waiting to be used. Each expires 24 hours after it was made; try again later.`;
  }
  if (error instanceof ApiError && error.code === "registration_closed") {
    return "This server takes no new phones at all (its owner closed sign-up), so an invite would let no one in.";
  }
  return sentence(error);
}

async function makeInvite(identity) {
  const made = $("make-invite");
  const problem = $("make-invite-error");
  made.disabled = true;
  problem.textContent = "";
  try {
    const { invite, expires_at: expiresAt } = await call("POST", "/v1/invites", { token: identity.token });
    $("invite-link").textContent = inviteLink(invite);
    $("invite-code").textContent = invite;
    $("invite-expires").textContent = `${when(expiresAt * 1000)} (single use)`;
    $("invite-cli").textContent = `relaybox phone register --server ${location.origin} --invite ${invite}`;
    $("invite-copy-status").textContent = "";
    $("new-invite").hidden = false;
    made.textContent = "Make another invite";
  } catch (error) {
    $("new-invite").hidden = true;
    problem.textContent = refusal(error);
  } finally {
    made.disabled = false;
  }
}

/** Wire Settings' "Invite someone". */
export function initInvites(identity) {
  $("make-invite").addEventListener("click", guarded(() => makeInvite(identity)));
  $("copy-invite").addEventListener("click", () => copyText($("invite-link"), $("invite-copy-status"), "the link"));
}
