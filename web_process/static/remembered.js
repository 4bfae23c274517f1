// Remembered answers: "Remember my answer" on a form card, and the list of what main answers
// without asking (its rules, web_process/remembered.py), each remembered one revocable here.

import {el} from "./dom.js";

const CHOICES = [["", "Don't remember"], ["session", "Remember for this session"], ["always", "Remember always"],
  ["until", "Remember until…"]];
const DEFAULT_UNTIL_DAYS = 7;
let boxCount = 0;

function isoDay(date) {
  return `${date.getFullYear()}-${String(date.getMonth() + 1).padStart(2, "0")}-${String(date.getDate()).padStart(2, "0")}`;
}

// The box on a form card; `choice(action)` is the answer's `remember`, or undefined.
export function rememberBox(who) {
  const id = `remember-${++boxCount}`;
  const scope = el("select", {id, title: `Next time ${who} asks exactly this, answer the same way without asking. ` +
    "Revoke it any time under Remembered."});
  CHOICES.forEach(([value, label]) => scope.append(el("option", {value, text: label})));
  const today = new Date();
  const later = new Date(today.getFullYear(), today.getMonth(), today.getDate() + DEFAULT_UNTIL_DAYS);
  const until = el("input", {type: "date", id: `${id}-until`, min: isoDay(today), value: isoDay(later),
    "aria-label": "Remember until this day"});
  until.hidden = true;
  scope.addEventListener("change", () => { until.hidden = scope.value !== "until"; });
  const row = el("div", {class: "field remember"}, el("label", {for: id, text: `Remember my answer to ${who}:`}),
    scope, until);
  const choice = (action) => {
    if (!scope.value || (action !== "accept" && action !== "decline")) return undefined;
    if (scope.value !== "until") return {scope: scope.value};
    const [year, month, day] = until.value.split("-").map(Number);
    // "until May 3" includes May 3: its last millisecond, this device's local time
    return {scope: "until", until: new Date(year, month - 1, day, 23, 59, 59, 999).getTime()};
  };
  return {row, choice};
}

// The Remembered section: `show(rows)` on every `rules`, `report(lines, problem)` after a revoke.
export function rememberedPanel(revoke) {
  const list = document.getElementById("rules");
  const empty = document.getElementById("rules-empty");
  const status = document.getElementById("rules-status");
  const all = document.getElementById("revoke-all");
  all.addEventListener("click", () => revoke([], true));
  return {
    show(rows) {
      list.replaceChildren();
      for (const rule of rows) {
        const item = el("li", {class: rule.revocable && rule.applies ? "rule" : "rule quiet", "data-rule": rule.id},
          el("span", {text: `${rule.who}: ${rule.what} · ${rule.scope}`}),
          el("small", {text: rule.made + (rule.note ? ` (${rule.note})` : "")}));
        if (rule.revocable) {
          const button = el("button", {type: "button", text: "Revoke", "aria-label": `Revoke ${rule.who}: ${rule.what}`});
          button.addEventListener("click", () => { button.disabled = true; revoke([rule.id], false); });
          item.append(button);
        }
        list.append(item);
      }
      empty.hidden = rows.length !== 0;
      all.disabled = !rows.some((rule) => rule.revocable);
    },
    report(lines, problem) {
      status.textContent = lines.join("\n");
      status.classList.toggle("problem", problem);
    },
    clear() { this.show([]); },
  };
}
