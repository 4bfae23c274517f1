// "Waiting in another window", as the Qt window lists it: requests whose tool call was made in
// another attached window (the web window's core, shared/window_core.py, decides which), each with
// "Answer here", which makes it this page's card instead. Lines are the Qt window's own text.

import {el} from "./dom.js";

// The list is now `items` (oldest first); `answerHere(channel)` resolves to an error text or "".
export function showElsewhere(items, answerHere) {
  const section = document.getElementById("elsewhere");
  const list = document.getElementById("elsewhere-list");
  const problem = document.getElementById("elsewhere-problem");
  list.replaceChildren();
  problem.textContent = "";
  for (const item of items) {
    const button = el("button", {type: "button", text: "Answer here", "data-name": "answer-here",
      title: "Show this request in this window instead", "aria-label": `Answer here: ${item.text}`});
    button.addEventListener("click", async () => {
      button.disabled = true;
      const failed = await answerHere(item.channel);
      if (failed) {
        button.disabled = false;
        problem.textContent = `Not taken: ${failed}`;
      }
    });
    list.append(el("li", {}, el("span", {text: item.text, title: item.message}), button));
  }
  document.getElementById("elsewhere-h").textContent = `${items.length} waiting in another window`;
  section.hidden = items.length === 0;
}

export function clearElsewhere() { showElsewhere([], () => Promise.resolve("")); }
