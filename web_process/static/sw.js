// The web window's service worker: it shows the page's notifications (Android's Chrome shows none
// without one) and brings the page forward when one is clicked. No fetch handler and no cache:
// every page is the device's own, behind its cookie, and is never kept.
"use strict";

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  event.waitUntil(self.clients.matchAll({type: "window"}).then((pages) =>
    pages.length ? pages[0].focus() : self.clients.openWindow("/")));
});
