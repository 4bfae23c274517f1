// An approval's grant, as on the Qt card (renderer_process/grant_box.py): which arguments × how
// long × one call only, the pattern main proposed (one editable glob per argument), and one line
// saying what the grant will cover, in the words of shared/grant_text.py. main checks the grant
// (a pattern that does not cover the call is refused, and said on the card).

import {el} from "./dom.js";

let grantCount = 0;

function select(id, label, options) {
  const control = el("select", {id, "aria-label": label});
  options.forEach(([value, title]) => control.append(el("option", {value, text: title})));
  return control;
}

function endOfDay(value) {  // "2026-12-13" -> its last millisecond, local time ("until" includes the day)
  const [year, month, day] = value.split("-").map(Number);
  return new Date(year, month - 1, day, 23, 59, 59, 999).getTime();
}

function shownDay(ms) {
  const date = new Date(ms);
  const two = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${two(date.getMonth() + 1)}-${two(date.getDate())} ${two(date.getHours())}:${two(date.getMinutes())}`;
}

function argumentsText(tool, scope, pattern) {
  if (scope === "exact") return `${tool} with exactly the approved arguments`;
  if (scope === "pattern") {
    const likes = Object.keys(pattern).sort().map((name) => `${name} like “${pattern[name]}”`).join(", ");
    return likes ? `${tool} with ${likes}` : `${tool} with no arguments`;
  }
  return `${tool} with any arguments`;
}

function durationText(duration, until) {
  if (duration === "until" && until !== undefined) return "until " + shownDay(until);
  return {session: "for this session", hour: "for an hour", always: "always"}[duration] || duration;
}

export function grantBox(card) {
  const offer = card.approval.grant;
  const id = `g${++grantCount}`;
  const scope = select(`${id}-arguments`, "Which arguments", offer.arguments);
  const duration = select(`${id}-duration`, "How long", offer.durations);
  const until = el("input", {type: "date", id: `${id}-until`, "aria-label": "Until"});
  const inWeek = new Date(Date.now() + 7 * 86400000);
  until.value = `${inWeek.getFullYear()}-${String(inWeek.getMonth() + 1).padStart(2, "0")}-${String(inWeek.getDate()).padStart(2, "0")}`;
  const single = el("input", {type: "checkbox", id: `${id}-single`});
  const globs = offer.pattern.map(([name, glob]) => {
    const input = el("input", {type: "text", id: `${id}-pattern-${name}`, "aria-label": `${name} like`});
    input.value = glob;
    return [name, input];
  });
  const patternRows = el("div", {class: "grant-pattern"}, ...globs.map(([name, input]) =>
    el("div", {class: "field"}, el("label", {for: input.id, text: `${name} like`}), input)));
  const summary = el("p", {class: "grant-summary", "aria-live": "polite"});
  const row = el("div", {class: "grant-row"}, el("span", {text: "Or allow "}), scope, duration, until,
    el("label", {class: "check"}, single, el("span", {text: " one call only"})));

  function choice() {
    const chosen = {arguments: scope.value, duration: duration.value};
    if (scope.value === "pattern") chosen.pattern = Object.fromEntries(globs.map(([name, input]) => [name, input.value]));
    if (duration.value === "until") chosen.until = endOfDay(until.value);
    if (single.checked) chosen.singleUse = true;
    return chosen;
  }

  function update() {
    const chosen = choice();
    patternRows.hidden = chosen.arguments !== "pattern" || !globs.length;
    until.hidden = chosen.duration !== "until";
    summary.textContent = `Allows ${argumentsText(card.approval.tool, chosen.arguments, chosen.pattern || {})}, ` +
      durationText(chosen.duration, chosen.until) + (chosen.singleUse ? ", one call only" : "");
  }

  [scope, duration, until, single, ...globs.map(([, input]) => input)].forEach((control) => {
    control.addEventListener("input", update);
    control.addEventListener("change", update);
  });
  update();
  return {
    element: el("div", {class: "grant"}, row, patternRows, summary),
    choice,
    decision: () => duration.value === "session" ? "allow-session" : "allow-always",
  };
}
