// "Decline all from <server> for this session" (msgServerPolicy), as on the Qt card: main answers
// that server's further requests with decline until it restarts. The page lists the servers it
// declined, each with "Ask again"; main keeps no list a window could read, so after a reload
// the Qt window's Servers panel asks again.

import {el} from "./dom.js";

const declining = new Set();

export function declineAllButton(server, onDecline) {
  const label = `Decline all from ${server} for this session`;
  const button = el("button", {type: "button", class: "link-button", text: label, "data-name": "decline-all",
    title: `Decline this request and every further one from ${server} until main restarts.`});
  button.addEventListener("click", onDecline);
  return el("div", {class: "secondary"}, button);
}

// main took (or not) the page's policy for `server`.
export function policyNews(message, send) {
  const list = document.getElementById("declining");
  if (!message.sent) {
    list.append(el("li", {class: "problem", text: `Not sent to main: the policy for ${message.server}; try again.`}));
    return;
  }
  if (message.declineAll) declining.add(message.server);
  else declining.delete(message.server);
  list.replaceChildren();
  for (const server of declining) {
    const again = el("button", {type: "button", text: "Ask again", "aria-label": `Ask again: show ${server}'s requests`});
    again.addEventListener("click", () => send({type: "server-policy", server, declineAll: false}));
    list.append(el("li", {}, el("span", {text: `Declining all requests from ${server} for this session.`}), again));
  }
}
