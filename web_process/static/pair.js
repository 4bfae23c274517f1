// Pairing: the one-time code is in the link's fragment (never sent in a request line, a log or a
// Referer); the button POSTs it and the answer sets this device's cookie.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const button = document.getElementById("pair");
  const result = document.getElementById("result");
  const code = decodeURIComponent(location.hash.slice(1));
  history.replaceState(null, "", "/pair");  // the code leaves the address bar and the history
  if (!code) {
    result.textContent = "This link has no pairing code: run `elicitron pair --web` for one.";
    button.disabled = true;
    return;
  }
  button.addEventListener("click", async () => {
    button.disabled = true;
    result.textContent = "Pairing…";
    try {
      const response = await fetch("/api/pair", {
        method: "POST", headers: {"Content-Type": "application/json"},
        body: JSON.stringify({code}), credentials: "same-origin",
      });
      const body = await response.json().catch(() => ({}));
      if (!response.ok) {
        result.textContent = "Not paired: " + (body.error || response.status);
        return;
      }
      result.textContent = "Paired as " + body.name + ".";
      location.replace("/");
    } catch (error) {
      result.textContent = "Not paired: " + error;
      button.disabled = false;
    }
  });
});
