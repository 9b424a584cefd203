// A notification's attachment in the open web phone (docs/protocol.md "Attachments"): the sealed
// file is fetched from this server with the phone's credential and opened here with the key its
// notification carried (tweetnacl's secretbox: `secretbox-v1`, the 24-byte nonce then the box), so
// the server never sees it in clear. An image (PNG, JPEG, GIF, WebP) shows inline; any file is
// offered as a download with its name and type. Opened files are kept in IndexedDB (store.js,
// bounded), so a reload shows them without fetching again.
import "/app/notes.js";
import "/app/store.js";
import { element } from "/app/ui.js";
import { fromBase64 } from "/static/relaybox-wire.js";

const store = globalThis.relayboxStore;
const notes = globalThis.relayboxNotes;
const INLINE = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const NONCE = 24;
const ID = /^att_[A-Za-z0-9_-]{1,64}$/;

/** The attachment's opened bytes as a Blob of its type, from IndexedDB or fetched and opened now. */
async function opened(identity, attachment) {
  const kept = await store.file(attachment.id);
  if (kept) return kept.blob;
  if (!ID.test(attachment.id) || attachment.format !== "secretbox-v1") throw new Error("it is not in a format this app opens");
  const response = await fetch(`/v1/attachments/${encodeURIComponent(attachment.id)}`, {
    headers: { Authorization: `Bearer ${identity.token}` },
  });
  if (response.status === 404) throw new Error("the server no longer keeps it");
  if (!response.ok) throw new Error(`the server answered ${response.status}`);
  const sealed = new Uint8Array(await response.arrayBuffer());
  const plain = sealed.length > NONCE
    ? globalThis.nacl.secretbox.open(sealed.subarray(NONCE), sealed.subarray(0, NONCE), fromBase64(attachment.key))
    : null;
  if (!plain) throw new Error("it could not be opened with its key");
  const blob = new Blob([plain], { type: INLINE.has(attachment.type) ? attachment.type : "application/octet-stream" });
  await store.keepFile(attachment.id, blob);
  return blob;
}

/** The attachment's part of a notification entry: filled in once the file is opened. */
export function attachmentView(identity, attachment) {
  const box = element("div", "attachment");
  const status = element("p", "muted", `Opening ${notes.attachmentLine(attachment)}…`);
  box.append(status);
  opened(identity, attachment).then(
    (blob) => {
      const url = URL.createObjectURL(blob);
      const parts = [];
      if (INLINE.has(attachment.type)) {
        const image = element("img", "attachment-image");
        image.src = url;
        image.alt = `Attached image ${attachment.name}`;
        parts.push(image);
      }
      const download = element("a", "button small", `Download ${attachment.name}`);
      download.href = url;
      download.download = attachment.name;
      const described = element("span", "muted attachment-kind", `${attachment.type || "file"}, ${notes.size(attachment.size)}`);
      const row = element("p", "attachment-row");
      row.append(download, described);
      parts.push(row);
      box.replaceChildren(...parts);
    },
    (error) => {
      status.className = "attachment-missing";
      status.textContent = `${notes.attachmentLine(attachment)} was attached, but ${error.message}.`;
    },
  );
  return box;
}
