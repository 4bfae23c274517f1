// The sign-in card (as renderer_process/sign_in_card.py): the server that wants you signed in,
// the authorization server's host in bold (where you will type your password), the scopes, every
// host the flow talks to (one on another host than the authorization server gets an unticked
// "Allow" box, and the sign-in waits for it), the link with its warnings. After "Sign in with
// browser" a box stays for a browser on another machine than main's: the address it ended on
// (main's 127.0.0.1, unreachable from there) pasted back finishes the sign-in (msgSignInRedirect).

import {buttons, el, linkParts, text} from "./dom.js";

// answer(action, content): answers the card, true once the web window took it; send(message):
// posts one more message, its problem or "".
export function signInBody(card, article, answer, send) {
  const info = card.signIn;
  const link = card.link;
  article.append(el("p", {class: "sign-in-host"}, document.createTextNode("You will sign in at "),
    el("strong", {text: info.authorizationServer || link.host || "?"})));
  article.append(el("p", {class: "scopes", text: "It asks for: " + (info.scopes.length ? info.scopes.join(", ")
    : "no particular permissions (the server's defaults)")}));
  if (info.hosts.length) {
    const list = el("ul", {class: "hosts", "aria-label": "Elicitron will talk to"});
    info.hosts.forEach((host) => list.append(el("li", {}, document.createTextNode(`${host.role}: `),
      el("strong", {text: host.origin}),
      host.elsewhere ? el("span", {class: "bad", text: " (another host than the authorization server)"}) : null)));
    article.append(el("p", {text: "Elicitron will talk to:"}), list);
  }
  const boxes = info.allow.map((origin, index) => {
    const id = `${card.channel}-allow-${index}`;
    const box = el("input", {type: "checkbox", id, "data-origin": origin});
    article.append(el("div", {class: "check"}, box, el("label", {for: id,
      text: `Allow ${origin} to receive the sign-in code, the PKCE verifier and any client secret`})));
    return box;
  });
  if (info.legacy) article.append(el("p", {class: "legacy", text: info.legacy}));
  article.append(...linkParts(link));
  const open = async () => {
    const allowed = boxes.filter((box) => box.checked).map((box) => box.dataset.origin);
    // The accept (with the hosts allowed) first: a sign-in page that answers at once sends the
    // browser back to main before a later accept could say where the code may go.
    if (!await answer("accept", allowed.length ? {[info.allowProperty]: allowed} : undefined)) return;
    window.open(link.url, "_blank", "noopener,noreferrer");  // within the click's activation (5 s)
    if (card.elicitationId) finishBox(card, send);
  };
  const row = buttons(["Sign in with browser", open, true, "sign-in"], ["Decline", () => answer("decline"), false, "decline"],
    ["Cancel", () => answer("cancel"), false, "cancel"]);
  const button = row.querySelector('[data-name="sign-in"]');
  const ready = () => { button.disabled = !link.openable || boxes.some((box) => !box.checked); };
  boxes.forEach((box) => box.addEventListener("change", ready));
  ready();
  if (!link.openable) {
    button.dataset.blocked = "1";
    article.append(el("p", {class: "refusal", text: `This link cannot be opened: ${link.refusal}.`}));
  }
  article.append(row);
}

const finishing = new Map();  // elicitationId -> {box, say}

function finishBox(card, send) {
  const landing = card.signIn.redirectUri || "http://127.0.0.1:…/callback";
  const id = `finish-${card.elicitationId}`;
  const field = el("input", {type: "url", id, placeholder: `${landing}?code=…&state=…`, autocomplete: "off"});
  const status = el("p", {class: "problem", role: "status"});
  const finish = el("button", {type: "button", class: "primary", text: "Finish sign-in", disabled: true});
  const close = el("button", {type: "button", text: "Close"});
  const box = el("article", {class: "card finish", "aria-labelledby": `${id}-h`},
    el("h2", {id: `${id}-h`, text: `Finishing the sign-in to ${card.server}`}),
    el("p", {text: `If this browser is not on the machine Elicitron runs on, it cannot deliver the sign-in: when it ` +
      `shows an error page at an address starting with ${landing}, copy that whole address and paste it here.`}),
    el("p", {}, el("a", {href: card.link.url, target: "_blank", rel: "noopener noreferrer",
      text: "Open the sign-in page again"}), text(" (if no new tab opened)")),
    el("div", {class: "field"}, el("label", {for: id, text: "The address the browser ended on"}), field),
    status, el("div", {class: "buttons"}, finish, close));
  field.addEventListener("input", () => { finish.disabled = !field.value.includes("code="); });
  finish.addEventListener("click", async () => {
    finish.disabled = true;
    status.textContent = "Sending…";
    const problem = await send({type: "sign-in-redirect", server: card.server, elicitationId: card.elicitationId,
      url: field.value.trim()});
    if (problem) { status.textContent = "Not sent: " + problem; finish.disabled = false; }
  });
  close.addEventListener("click", () => { box.remove(); finishing.delete(card.elicitationId); });
  finishing.set(card.elicitationId, {box, status, finish, field});
  document.getElementById("sign-ins").append(box);
}

// main's word on a sign-in: done (the redirect arrived, or the pasted address was right), or refused.
export function signInNews(message) {
  const entry = finishing.get(message.elicitationId);
  if (!entry) return;
  if (message.type === "sign-in-refused") {
    entry.status.textContent = "Not signed in: " + message.message;
    entry.finish.disabled = false;
    return;
  }
  entry.status.classList.remove("problem");
  entry.status.textContent = message.message || `Signed in to ${message.server}.`;
  entry.field.disabled = true;
  entry.finish.hidden = true;
}
