// The web window's page: one event stream from the web process (a renderer peer of main), one
// card per open request, answers POSTed back. Everything a server sent is put in with textContent
// (never innerHTML), so a message carrying markup shows as the text it is.
"use strict";

const cards = new Map();  // response channel -> {card, element, timer}
let stream = null;
let fieldCount = 0;

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

// Bidi overrides, zero-width and control characters, odd spaces: shown as ⟦U+XXXX⟧ in a link.
function visible(text) {
  return text.replace(/[\p{Cc}\p{Cf}\p{Z}]/gu, (ch) => ch === " " ? " " :
    "⟦U+" + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "⟧");
}

function setStatus(text) { document.getElementById("status").textContent = text; }

function updateCount() {
  const count = cards.size;
  document.getElementById("waiting").textContent =
    count === 0 ? "" : count === 1 ? "1 request waiting" : `${count} requests waiting`;
  document.getElementById("empty").hidden = count !== 0;
  document.title = count ? `(${count}) Elicitron` : "Elicitron";
}

function timeLeft(expiresAt) {
  const seconds = Math.max(0, Math.round((expiresAt - Date.now()) / 1000));
  const minutes = Math.floor(seconds / 60);
  return `Expires in ${minutes}:${String(seconds % 60).padStart(2, "0")}`;
}

async function send(card, action, content) {
  const entry = cards.get(card.channel);
  if (!entry) return;
  entry.element.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  entry.problem.textContent = "Sending…";
  const body = {type: "answer", channel: card.channel, action};
  if (content !== undefined) body.content = content;
  try {
    const response = await fetch(`/api/answer?stream=${encodeURIComponent(stream)}`, {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
      credentials: "same-origin",
    });
    if (!response.ok) {
      const reply = await response.json().catch(() => ({}));
      refused(card.channel, reply.error || `the web window answered ${response.status}`);
    }
  } catch (error) {
    refused(card.channel, String(error));
  }
}

function refused(channel, message) {
  const entry = cards.get(channel);
  if (!entry) return;
  entry.element.querySelectorAll("button").forEach((b) => { b.disabled = b.dataset.blocked === "1"; });
  entry.problem.textContent = "Not accepted: " + message;
}

function buttons(...specs) {
  const row = el("div", {class: "buttons"});
  for (const [text, onClick, primary, name] of specs) {
    const button = el("button", {type: "button", class: primary ? "primary" : "", text, "data-name": name});
    button.addEventListener("click", onClick);
    row.append(button);
  }
  return row;
}

function fieldControl(field) {
  const id = `f${++fieldCount}`;
  const describedBy = field.description ? `${id}-d` : undefined;
  const label = el("label", {for: id, text: field.title + (field.required ? " (required)" : "")});
  const help = field.description ? el("small", {id: describedBy, text: field.description}) : null;
  let input;
  let read;
  if (field.kind === "boolean") {
    input = el("input", {type: "checkbox", id, "aria-describedby": describedBy});
    input.checked = field.default === true;
    read = () => input.checked;
    const row = el("div", {class: "field check"}, input, label, help);
    return {row, read, name: field.name, required: field.required};
  }
  if (field.kind === "choice") {
    input = el("select", {id, required: field.required, "aria-describedby": describedBy});
    if (!field.required || field.default === undefined) input.append(el("option", {value: "", text: "—"}));
    field.choices.forEach((choice, index) => {
      const option = el("option", {value: String(index), text: choice.title});
      if (choice.value === field.default) option.selected = true;
      input.append(option);
    });
    read = () => input.value === "" ? undefined : field.choices[Number(input.value)].value;
  } else if (field.kind === "multi") {
    const box = el("fieldset", {class: "field", "aria-describedby": describedBy}, el("legend", {text: label.textContent}));
    const checks = field.choices.map((choice) => {
      const check = el("input", {type: "checkbox", id: `f${++fieldCount}`});
      check.checked = Array.isArray(field.default) && field.default.includes(choice.value);
      box.append(el("div", {class: "check"}, check, el("label", {for: check.id, text: choice.title})));
      return [check, choice.value];
    });
    if (help) box.append(help);
    read = () => checks.filter(([check]) => check.checked).map(([, value]) => value);
    return {row: box, read, name: field.name, required: field.required};
  } else if (field.kind === "number" || field.kind === "integer") {
    input = el("input", {type: "number", id, inputmode: field.kind === "integer" ? "numeric" : "decimal",
      step: field.kind === "integer" ? "1" : "any", min: field.minimum, max: field.maximum,
      required: field.required, "aria-describedby": describedBy});
    if (typeof field.default === "number") input.value = String(field.default);
    read = () => input.value === "" ? undefined : Number(input.value);
  } else {
    input = el("input", {type: field.inputType || "text", id, required: field.required,
      minlength: field.minLength, maxlength: field.maxLength, "aria-describedby": describedBy});
    if (typeof field.default === "string") input.value = field.default;
    read = () => input.value === "" && !field.required ? undefined : input.value;
  }
  return {row: el("div", {class: "field"}, label, input, help), read, name: field.name, required: field.required};
}

function formBody(card, article) {
  const form = el("form", {novalidate: false});
  const controls = card.fields.map(fieldControl);
  controls.forEach((control) => form.append(control.row));
  form.addEventListener("submit", (event) => event.preventDefault());
  const accept = () => {
    if (!form.reportValidity()) return;
    const content = {};
    for (const control of controls) {
      const value = control.read();
      if (value !== undefined) content[control.name] = value;
    }
    send(card, "accept", content);
  };
  article.append(form, buttons(["Accept", accept, true, "accept"], ["Decline", () => send(card, "decline"), false, "decline"],
    ["Cancel", () => send(card, "cancel"), false, "cancel"]));
}

function linkBody(card, article) {
  const link = card.link;
  const [before, host, after] = link.runs;
  article.append(el("p", {class: "link"}, document.createTextNode(visible(before)), el("strong", {text: visible(host)}),
    document.createTextNode(visible(after))));
  if (link.address) article.append(el("p", {text: visible(`${link.host} is the address ${link.address}.`)}));
  if (link.warnings.length) {
    const list = el("ul", {class: "warnings"});
    link.warnings.forEach((warning) => list.append(el("li", {text: visible(warning)})));
    article.append(list);
  }
  const open = () => {
    window.open(link.url, "_blank", "noopener,noreferrer");
    send(card, "accept");
  };
  const row = buttons(["Open link", open, true, "open"], ["Decline", () => send(card, "decline"), false, "decline"],
    ["Cancel", () => send(card, "cancel"), false, "cancel"]);
  if (!link.openable) {
    const button = row.querySelector('[data-name="open"]');
    button.disabled = true;
    button.dataset.blocked = "1";
    article.append(el("p", {class: "refusal", text: `This link cannot be opened: ${link.refusal}.`}));
  }
  article.append(row);
}

function approvalBody(card, article) {
  const info = card.approval;
  article.append(el("p", {class: "tool"}, document.createTextNode("Run "), el("strong", {text: `${info.server}/${info.tool}`}),
    document.createTextNode(info.title ? ` (${info.title})` : "")));
  if (info.description) article.append(el("p", {class: "message", text: info.description}));
  const list = el("dl", {class: "arguments"});
  info.arguments.forEach(([key, value]) => list.append(el("dt", {text: key}), el("dd", {text: value})));
  if (!info.arguments.length) list.append(el("dt", {text: "(no arguments)"}));
  article.append(list, buttons(...info.buttons.map(([decision, text]) =>
    [text, () => send(card, "accept", {decision}), decision === "allow-once", decision])));
}

function addCard(card) {
  if (cards.has(card.channel)) return;
  const article = el("article", {class: "card", "aria-labelledby": `${card.channel}-h`});
  const who = card.asker ? `${card.asker.name}${card.asker.pid ? ` (pid ${card.asker.pid}` +
    (card.asker.machine ? ` on ${card.asker.machine})` : ")") : ""}` : card.server;
  article.append(el("h2", {id: `${card.channel}-h`}, el("strong", {text: who}),
    document.createTextNode(card.kind === "approval" ? " wants to run a tool" : " asks")));
  if (card.via) article.append(el("p", {class: "via", text: `via ${card.via}`}));
  const expires = card.expiresAt ? el("p", {class: "time-left"}) : null;
  if (expires) article.append(expires);
  if (card.kind !== "approval") article.append(el("p", {class: "message", text: card.message}));
  if (card.kind === "form") formBody(card, article);
  else if (card.kind === "url") linkBody(card, article);
  else if (card.kind === "approval") approvalBody(card, article);
  else {
    article.append(el("p", {class: "refusal", text: `This request cannot be shown here: ${card.why}`}),
      buttons(["Decline", () => send(card, "decline"), true, "decline"], ["Cancel", () => send(card, "cancel"), false, "cancel"]));
  }
  const problem = el("p", {class: "problem", role: "alert"});
  article.append(problem);
  let timer = null;
  if (expires) {
    const tick = () => { expires.textContent = timeLeft(card.expiresAt); };
    tick();
    timer = setInterval(tick, 1000);
  }
  cards.set(card.channel, {card, element: article, problem, timer});
  document.getElementById("cards").append(article);
  updateCount();
}

function removeCard(channel) {
  const entry = cards.get(channel);
  if (!entry) return;
  clearInterval(entry.timer);
  entry.element.remove();
  cards.delete(channel);
  updateCount();
}

function clearCards() { [...cards.keys()].forEach(removeCard); }

function onMessage(message) {
  switch (message.type) {
    case "hello": stream = message.stream; setStatus(`Paired as ${message.device}; connecting to main…`); break;
    case "attached": clearCards(); message.cards.forEach(addCard); setStatus("Connected to main."); break;
    case "invoke": addCard(message.card); break;
    case "dismiss": removeCard(message.channel); break;
    case "refused": refused(message.channel, message.message); break;
    case "detached": clearCards(); setStatus(`Not connected to main (${message.why}); trying again…`); break;
    default: break;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  updateCount();
  const events = new EventSource("/events");
  events.onmessage = (event) => onMessage(JSON.parse(event.data));
  events.onerror = () => {
    clearCards();
    // A refused stream (HTTP 401: the device was revoked) is final; a lost connection is retried.
    setStatus(events.readyState === EventSource.CLOSED
      ? "This browser is no longer paired (or the web window refused it): pair it again with `elicitron pair --web`."
      : "The web window is unreachable; trying again…");
  };
});
