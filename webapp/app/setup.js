// Set-up, as the phone: register this browser, with an invite where the server asks for one.
// The invite field shows when an invite link opened the app (filled in) or when the server
// refused a phone without one (403 registration_closed, details.registration "invite"); a server
// that takes no new phones at all ("closed") says so instead, since no invite would help.
import { ApiError } from "/app/api.js";
import { inviteIn } from "/app/invites.js";
import { registerPhone } from "/app/phone.js";
import { showPhone } from "/app/phone_view.js";
import { $, fieldError, sentence } from "/app/ui.js";

const BY_INVITE = "This server takes new phones by invite only.";
const FROM_LINK = "Your invite link filled in the invite.";
const CLOSED =
  "This server takes no new phones: its owner has closed sign-up, and no invite changes that. " +
  "If you already have a phone on this server, this browser can still be one of your computers.";
const WRONG_INVITE = "This invite is wrong, already used or expired. Ask for a new one.";

/** Show the invite field, saying `why`; and how to get an invite unless one came with a link. */
function showInviteField(why, invite = "") {
  $("invite-why").textContent = why;
  showHowToGetOne(!invite);
  $("invite-box").hidden = false;
  if (invite) $("invite").value = invite;
}

function showHowToGetOne(shown) {
  $("invite-how").hidden = !shown;
  const described = shown ? "invite-why invite-how invite-error" : "invite-why invite-error";
  $("invite").setAttribute("aria-describedby", described); // a hidden paragraph is not read either
}

/** What the set-up form does with a refusal of the phone's registration. */
function refused(error) {
  const inviteField = $("invite");
  if (error.code === "registration_closed" && error.details.registration === "closed") {
    $("invite-box").hidden = true;
    $("closed-note").textContent = CLOSED;
    $("choose-phone").disabled = true;
  } else if (error.code === "registration_closed") {
    showInviteField(BY_INVITE);
    inviteField.focus();
  } else if (error.code === "invalid_invite") {
    showHowToGetOne(true);
    fieldError(inviteField, WRONG_INVITE);
    inviteField.focus();
  } else {
    fieldError($("device-name"), sentence(error));
  }
}

async function registerAsPhone() {
  const name = $("device-name").value.trim() || "My phone";
  const inviteField = $("invite");
  const asked = !$("invite-box").hidden;
  const invite = asked ? inviteIn(inviteField.value) : "";
  fieldError($("device-name"), "");
  fieldError(inviteField, "");
  if (asked && !invite) {
    fieldError(inviteField, "Paste the invite you were given: it starts with rbi_.");
    inviteField.focus();
    return;
  }
  let identity;
  try {
    identity = await registerPhone(name, invite ? { invite } : {});
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    refused(error);
    return;
  }
  await showPhone(identity);
}

/** The set-up form's "This is my phone"; `invite`: one an invite link brought. */
export function offerPhoneSetUp(invite) {
  if (invite) showInviteField(FROM_LINK, invite);
  return registerAsPhone;
}
