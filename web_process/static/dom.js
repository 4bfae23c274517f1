// DOM helpers shared by the page's modules: elements built with textContent only (never
// innerHTML), and hidden characters of a link made visible.

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

export function text(value) { return document.createTextNode(value); }

// Bidi overrides, zero-width and control characters, odd spaces: shown as ⟦U+XXXX⟧ in a link.
export function visible(value) {
  return value.replace(/[\p{Cc}\p{Cf}\p{Z}]/gu, (ch) => ch === " " ? " " :
    "⟦U+" + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "⟧");
}

export function buttons(...specs) {
  const row = el("div", {class: "buttons"});
  for (const [label, onClick, primary, name] of specs) {
    const button = el("button", {type: "button", class: primary ? "primary" : "", text: label, "data-name": name});
    button.addEventListener("click", onClick);
    row.append(button);
  }
  return row;
}

// The link as the Qt card shows it: before the host, the host in bold, after it; the real
// address of a numeric host written another way (0x7f.1); the warnings.
export function linkParts(link) {
  const [before, host, after] = link.runs;
  const parts = [el("p", {class: "link"}, text(visible(before)), el("strong", {text: visible(host)}),
    text(visible(after)))];
  if (link.address && link.address !== link.host.replace(/^\[|\]$/g, "")) parts.push(el("p", {text: visible(`${link.host} is the address ${link.address}.`)}));
  if (link.warnings.length) {
    const list = el("ul", {class: "warnings"});
    link.warnings.forEach((warning) => list.append(el("li", {text: "⚠ " + visible(warning)})));
    parts.push(list);
  }
  return parts;
}

// One message to the web window (answers, revocations, a pasted sign-in address); the reply's
// error text, or "" when it was taken.
export async function post(stream, message) {
  try {
    const response = await fetch(`/api/answer?stream=${encodeURIComponent(stream)}`, {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(message),
      credentials: "same-origin",
    });
    if (response.ok) return "";
    const reply = await response.json().catch(() => ({}));
    return reply.error || `the web window answered ${response.status}`;
  } catch (error) {
    return String(error);
  }
}
