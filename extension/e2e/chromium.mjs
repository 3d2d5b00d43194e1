// The browser the end-to-end test drives (Debian's chromium), and its flags: shared by run.mjs and
// render_results.mjs.
export const CHROMIUM = "/usr/bin/chromium";
export const CHROMIUM_FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
