// The web window's page: one event stream from the web process (a renderer peer of main), one
// card per open request, what the person does POSTed back. Everything a server or program sent is
// put in with textContent (never innerHTML), so a message carrying markup shows as the text it is.
// The cards are the Qt window's: a form (a program's yes/no question as Yes / No), a link, a
// sign-in (sign_in.js), a tool approval; each with its time left (time_left.js); remembered answers
// and their revocation (remembered.js); "Decline all from <server>" (policy.js); notifications
// while the page is hidden (notify.js); requests waiting in another window, with "Answer here"
// (elsewhere.js).

import {buttons, el, linkParts, post, text} from "./dom.js";
import {clearElsewhere, showElsewhere} from "./elsewhere.js";
import {notifyNew, setUpNotifications, unnotify} from "./notify.js";
import {grantBox} from "./grant.js";
import {declineAllButton, policyNews} from "./policy.js";
import {rememberBox, rememberedPanel} from "./remembered.js";
import {signInBody, signInNews} from "./sign_in.js";
import {countDown} from "./time_left.js";

const cards = new Map();  // response channel -> {card, element, problem, stop}
let stream = null;
let fieldCount = 0;
let remembered = null;

const send = (message) => post(stream, message);
const answerHere = (channel) => send({type: "answer-here", channel});

function setStatus(value) { document.getElementById("status").textContent = value; }

// "2 requests waiting (demo: 1, deploy.sh: 1)", as the Qt window counts them (a program by its name)
function updateCount() {
  const count = cards.size;
  const perWho = new Map();
  for (const {card} of cards.values()) perWho.set(card.server, (perWho.get(card.server) || 0) + 1);
  const groups = [...perWho].map(([who, n]) => `${who}: ${n}`).join(", ");
  document.getElementById("waiting").textContent =
    count === 0 ? "" : `${count} ${count === 1 ? "request" : "requests"} waiting (${groups})`;
  document.getElementById("empty").hidden = count !== 0;
  document.title = count ? `(${count}) Elicitron` : "Elicitron";
}

async function answer(card, action, content, remember, reason, grant) {
  const entry = cards.get(card.channel);
  if (!entry) return;
  entry.element.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  entry.problem.textContent = "Sending…";
  const body = {type: "answer", channel: card.channel, action};
  if (content !== undefined) body.content = content;
  if (remember !== undefined) body.remember = remember;
  if (reason) body.reason = reason;  // an approval's deny: for the agent (main cleans it again)
  if (grant) body.grant = grant;  // an approval's "Allow as chosen" (grant.js)
  const problem = await send(body);
  if (problem) refused(card.channel, problem);
  return !problem;
}

function refused(channel, message) {
  const entry = cards.get(channel);
  if (!entry) return;
  entry.element.querySelectorAll("button").forEach((b) => { b.disabled = b.dataset.blocked === "1"; });
  entry.problem.textContent = "Not accepted: " + message;
}

function fieldControl(field) {
  const id = `f${++fieldCount}`;
  const describedBy = field.description ? `${id}-d` : undefined;
  const label = el("label", {for: id, text: field.title + (field.required ? " (required)" : "")});
  const help = field.description ? el("small", {id: describedBy, text: field.description}) : null;
  // Its problem, shown once the person pressed Accept (fieldProblem): empty and hidden until then.
  const error = el("small", {id: `${id}-e`, class: "field-error", hidden: true});
  const described = [describedBy, error.id].filter(Boolean).join(" ");
  let input;
  let read;
  if (field.kind === "boolean") {
    input = el("input", {type: "checkbox", id, "aria-describedby": describedBy});
    input.checked = field.default === true;
    read = () => input.checked;
    const row = el("div", {class: "field check"}, input, label, help);
    return {row, read, input, name: field.name, required: field.required};
  }
  if (field.kind === "choice") {
    input = el("select", {id, required: field.required, "aria-describedby": described});
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
      required: field.required, "aria-describedby": described});
    if (typeof field.default === "number") input.value = String(field.default);
    read = () => input.value === "" ? undefined : Number(input.value);
  } else {
    input = el("input", {type: field.inputType || "text", id, required: field.required,
      minlength: field.minLength, maxlength: field.maxLength, "aria-describedby": described});
    if (typeof field.default === "string") input.value = field.default;
    read = () => input.value === "" && !field.required ? undefined : input.value;
  }
  return {row: el("div", {class: "field"}, label, input, help, error), read, input, error, title: field.title,
    name: field.name, required: field.required};
}

// A field's problem under it ("is required", else the browser's own words for a value it refuses),
// as "Title: problem" for the card's line; "" when it has none. Only ever after Accept was pressed:
// a required field is marked "(required)", not flagged in red before anything was typed (issue 37).
function fieldProblem(control) {
  const {input, error} = control;
  if (!error) return "";
  const problem = input.checkValidity() ? "" : input.validity.valueMissing ? "is required" : input.validationMessage;
  error.textContent = problem;
  error.hidden = !problem;
  if (problem) input.setAttribute("aria-invalid", "true");
  else input.removeAttribute("aria-invalid");
  return problem ? `${control.title}: ${problem}` : "";
}

function formBody(card, article) {
  const form = el("form", {"aria-label": "Answer"});
  const controls = card.fields.map(fieldControl);
  controls.forEach((control) => form.append(control.row));
  form.addEventListener("submit", (event) => event.preventDefault());
  const remember = card.remember ? rememberBox(card.remember.who) : null;
  const reply = (action, content) => answer(card, action, content, remember ? remember.choice(action) : undefined);
  let tried = false;  // Accept was pressed: problems show, and follow what is typed
  const problems = () => {
    const found = controls.map(fieldProblem).filter(Boolean);
    cards.get(card.channel).problem.textContent = found.length ? "To accept: " + found.join("; ") : "";
    return found;
  };
  controls.forEach((control) => control.error && control.input.addEventListener("input", () => {
    if (tried) problems();
  }));
  const accept = () => {
    tried = true;
    if (problems().length) {  // nothing sent: the first field concerned takes the focus
      controls.find((control) => control.error && !control.error.hidden).input.focus();
      return;
    }
    const content = {};
    for (const control of controls) {
      const value = control.read();
      if (value !== undefined) content[control.name] = value;
    }
    reply("accept", content);
  };
  // A program's yes/no question (`elicitron ask --yes-no`): Yes accepts its boolean ticked, No declines.
  const confirm = card.confirm !== null ? controls.find((control) => control.name === card.confirm) : undefined;
  if (confirm) {
    confirm.input.checked = true;
    form.hidden = true;
  }
  article.append(form);
  if (remember) article.append(remember.row);
  article.append(buttons([confirm ? "Yes" : "Accept", accept, true, "accept"],
    [confirm ? "No" : "Decline", () => reply("decline"), false, "decline"], ["Cancel", () => reply("cancel"), false, "cancel"]));
  if (card.declineAll) article.append(declineAllButton(card.server, () => declineAll(card)));
}

async function declineAll(card) {
  if (await send({type: "server-policy", server: card.server, declineAll: true}) === "") answer(card, "decline");
}

function linkBody(card, article) {
  const link = card.link;
  article.append(...linkParts(link));
  const open = () => {
    window.open(link.url, "_blank", "noopener,noreferrer");
    answer(card, "accept");
  };
  const row = buttons(["Open link", open, true, "open"], ["Decline", () => answer(card, "decline"), false, "decline"],
    ["Cancel", () => answer(card, "cancel"), false, "cancel"]);
  if (!link.openable) {
    const button = row.querySelector('[data-name="open"]');
    button.disabled = true;
    button.dataset.blocked = "1";
    article.append(el("p", {class: "refusal", text: `This link cannot be opened: ${link.refusal}.`}));
  }
  article.append(row);
  if (card.declineAll) article.append(declineAllButton(card.server, () => declineAll(card)));
}

function approvalBody(card, article) {
  const info = card.approval;
  article.append(el("p", {class: "tool"}, text("Run "), el("strong", {text: `${info.server}/${info.tool}`}),
    text(info.title ? ` (${info.title})` : "")));
  if (info.description) article.append(el("p", {class: "message", text: info.description}));
  const list = el("dl", {class: "arguments"});
  info.arguments.forEach(([key, value]) => list.append(el("dt", {text: key}), el("dd", {text: value})));
  if (!info.arguments.length) list.append(el("dt", {text: "(no arguments)"}));
  // Optional, sent only with Deny: the agent whose call it was is told why (as on the Qt card).
  const reason = el("input", {type: "text", id: `${card.channel}-reason`, name: "reason",
    maxlength: info.reasonMaxChars, placeholder: "optional, if you deny"});
  const reasonRow = el("div", {class: "field"}, el("label", {for: reason.id, text: "Reason (sent to the agent)"}), reason);
  const grant = info.grant ? grantBox(card) : null;  // main offers grants: "Allow as chosen"
  const decide = (decision) => decision === "grant"
    ? answer(card, "accept", {decision: grant.decision()}, undefined, undefined, grant.choice())
    : answer(card, "accept", {decision}, undefined, decision === "deny" ? reason.value.trim() : undefined);
  article.append(list, reasonRow);
  if (grant) article.append(grant.element);
  article.append(buttons(...info.buttons.map(([decision, label]) =>
    [label, () => decide(decision), decision === "allow-once", decision])));
}

const HEADINGS = {form: " asks for input", url: " asks you to open a link", "sign-in": " needs you to sign in",
  approval: " wants to run a tool", unsupported: " asks for something this page cannot show"};

function addCard(card) {
  const known = cards.get(card.channel);
  if (known && card.quorum) {  // a quorum approval's new count: answer again until it is decided
    known.element.querySelector(".quorum").textContent = card.quorum;
    known.element.querySelectorAll("button").forEach((b) => { b.disabled = b.dataset.blocked === "1"; });
    return;
  }
  if (known) return;
  const article = el("article", {class: "card", "aria-labelledby": `${card.channel}-h`, "data-kind": card.kind});
  article.append(el("h2", {id: `${card.channel}-h`}, el("strong", {text: card.who}), text(HEADINGS[card.kind] || " asks")));
  const via = [card.via && `via ${card.via}`, card.machine && `on ${card.machine}`].filter(Boolean).join(" ");
  if (via) article.append(el("p", {class: "via", text: via}));
  if (card.quorum) article.append(el("p", {class: "quorum", text: card.quorum}));
  const expires = card.msLeft !== null ? el("p", {class: "time-left", role: "timer", "aria-live": "off"}) : null;
  if (expires) article.append(expires);
  if (card.kind !== "approval") article.append(el("p", {class: "message", text: card.message}));
  if (card.kind === "form") formBody(card, article);
  else if (card.kind === "url") linkBody(card, article);
  else if (card.kind === "sign-in") signInBody(card, article, (action, content) => answer(card, action, content), send);
  else if (card.kind === "approval") approvalBody(card, article);
  else {
    article.append(el("p", {class: "refusal", text: `This request cannot be shown here: ${card.why}`}),
      buttons(["Decline", () => answer(card, "decline"), true, "decline"], ["Cancel", () => answer(card, "cancel"), false, "cancel"]));
  }
  const problem = el("p", {class: "problem", role: "alert"});
  article.append(problem);
  const stop = expires ? countDown(expires, Date.now() + card.msLeft) : () => {};
  cards.set(card.channel, {card, element: article, problem, stop});
  document.getElementById("cards").append(article);
  updateCount();
}

function removeCard(channel) {
  const entry = cards.get(channel);
  if (!entry) return;
  entry.stop();
  entry.element.remove();
  cards.delete(channel);
  unnotify(channel);
  updateCount();
}

function clearCards() { [...cards.keys()].forEach(removeCard); }

const NOTE_MS = 8000;  // as long as the Qt window's status line

// The card's host stopped waiting: the window core's line ("<host> stopped waiting: <server>
// request withdrawn") stands where the card was for a few seconds, so it does not just vanish.
function withdrawCard(channel, note) {
  const entry = cards.get(channel);
  if (!entry) return;
  const gone = el("article", {class: "card gone", role: "status"}, el("p", {text: note}));
  entry.element.replaceWith(gone);
  removeCard(channel);
  setTimeout(() => gone.remove(), NOTE_MS);
}

function onMessage(message) {
  switch (message.type) {
    case "hello": stream = message.stream; setStatus(`Paired as ${message.device}; connecting to main…`); break;
    case "attached":
      clearCards();
      message.cards.forEach(addCard);
      showElsewhere(message.elsewhere || [], answerHere);
      setStatus("Connected to main.");
      break;
    case "invoke": addCard(message.card); notifyNew(message.card); break;
    case "dismiss": if (message.note) withdrawCard(message.channel, message.note); else removeCard(message.channel); break;
    case "elsewhere": showElsewhere(message.items, answerHere); break;
    case "refused": refused(message.channel, message.message); break;
    case "detached": clearCards(); clearElsewhere(); remembered.clear(); setStatus(`Not connected to main (${message.why}); trying again…`); break;
    case "rules": remembered.show(message.rules); break;
    case "revoked": remembered.report(message.lines, message.problem); break;
    case "completed": case "signed-in": case "sign-in-refused": signInNews(message); break;
    case "server-policy": policyNews(message, send); break;
    default: break;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  remembered = rememberedPanel((ids, all) => send({type: "revoke", ids, all}).then((problem) => {
    if (problem) remembered.report([`Not revoked: ${problem}`], true);
  }));
  setUpNotifications();
  updateCount();
  const events = new EventSource("/events");
  events.onmessage = (event) => onMessage(JSON.parse(event.data));
  events.onerror = () => {
    clearCards();
    clearElsewhere();
    remembered.clear();
    // A refused stream (HTTP 401: the device was revoked) is final; a lost connection is retried.
    setStatus(events.readyState === EventSource.CLOSED
      ? "This browser is no longer paired (or the web window refused it): pair it again with `elicitron pair --web`."
      : "The web window is unreachable; trying again…");
  };
});
