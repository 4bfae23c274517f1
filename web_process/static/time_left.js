// "Expires in 4:05", as the Qt card says it (renderer_process/time_left.py). The page counts down
// from the card's `msLeft` (the web window's reckoning when it sent the card) by its own clock, so a
// phone whose clock is off still shows the right time.

const MINUTE = 60, HOUR = 60 * MINUTE, DAY = 24 * HOUR, YEAR = 365 * DAY;
export const SOON_S = 60;  // under a minute left: shown as a warning

export function secondsLeft(deadline, now) {
  return Math.max(0, Math.ceil((deadline - now) / 1000));  // rounded up: "0:01" until it is over
}

export function timeLeftText(left) {
  if (left === 0) return "Expiring now";
  if (left >= YEAR) return "Expires in more than a year";
  if (left >= 2 * DAY) return `Expires in ${Math.floor(left / DAY)} days`;
  if (left >= HOUR) return `Expires in ${Math.floor(left / HOUR)} h ${String(Math.floor(left % HOUR / MINUTE)).padStart(2, "0")} min`;
  return `Expires in ${Math.floor(left / MINUTE)}:${String(left % MINUTE).padStart(2, "0")}`;
}

// Keep `node` saying how long is left until `deadline` (Date.now() ms); returns a stop function.
export function countDown(node, deadline) {
  let timer = null;
  const tick = () => {
    const left = secondsLeft(deadline, Date.now());
    const soon = left < SOON_S;
    node.textContent = (soon ? "⚠ " : "") + timeLeftText(left);
    node.classList.toggle("soon", soon);
    if (left === 0 && timer !== null) clearInterval(timer);  // main dismisses it now
  };
  tick();
  timer = setInterval(tick, 1000);
  return () => clearInterval(timer);
}
