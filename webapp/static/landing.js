// The landing page: name this server in the examples, and copy the curl example on request.

for (const element of document.querySelectorAll("[data-origin]")) {
  element.textContent = window.location.origin;
}

const status = document.getElementById("copy-status");
for (const button of document.querySelectorAll("button[data-copy]")) {
  const source = document.getElementById(button.dataset.copy);
  if (!source || !navigator.clipboard) continue; // the example stays selectable by hand
  button.hidden = false;
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(source.textContent);
      status.textContent = "Copied to the clipboard.";
      status.classList.add("ok");
    } catch {
      status.textContent = "Copying is not allowed here: select the text and copy it instead.";
      status.classList.remove("ok");
    }
  });
}
