// Knowing when to look while the page is open: a notification for each new card while the page is
// hidden, once the person allowed it (asked only on a click: browsers ignore a request without
// one). A notification says who asks and what kind of request it is, never what it asks or any
// value. Shown through the service worker (sw.js): Android's Chrome allows no `new Notification`.

const VERBS = {form: "asks for input", url: "asks you to open a link", "sign-in": "needs you to sign in",
  approval: "wants to run a tool", unsupported: "sent a request"};

let registration = null;

export function setUpNotifications() {
  const button = document.getElementById("notify");
  const state = document.getElementById("notify-state");
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.register("/sw.js").then((reg) => { registration = reg; })
      .catch(() => { registration = null; });
  }
  const show = () => {
    if (!("Notification" in window)) {
      button.hidden = true;
      // Browsers offer notifications (and service workers) only to https pages and to this machine's own
      state.textContent = window.isSecureContext ? "This browser cannot show notifications."
        : "Notifications need the web window behind https (--tls-cert, or a TLS reverse proxy).";
      return;
    }
    button.hidden = Notification.permission !== "default";
    state.textContent = Notification.permission === "granted" ? "Notifications are on while this page is open."
      : Notification.permission === "denied" ? "Notifications are blocked for this page (the browser's site settings)."
        : "";
  };
  button.addEventListener("click", () => { Notification.requestPermission().then(show); });
  show();
}

export function notifyNew(card) {
  if (!("Notification" in window) || Notification.permission !== "granted" || document.visibilityState !== "hidden") {
    return;
  }
  const body = `${card.who} ${VERBS[card.kind] || "asks"}`;
  const options = {body, tag: card.channel, icon: "/icon.svg", requireInteraction: false};
  if (registration) registration.showNotification("Elicitron: a request is waiting", options);
  else new Notification("Elicitron: a request is waiting", options);
}

export function unnotify(channel) {
  if (registration) {
    registration.getNotifications({tag: channel}).then((shown) => shown.forEach((n) => n.close()));
  }
}
