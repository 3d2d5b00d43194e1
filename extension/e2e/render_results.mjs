// Replays a recorded results-view payload through the extension's own renderer and screenshots it:
//
//   node e2e/render_results.mjs PAYLOAD.json OUT.png [--session PROGRESS.jsonl] [--width 1100]
//
// PAYLOAD.json: what `cudaAgent/results` answered, as bench/results_view_capture.py writes it
// (results_view.json); PROGRESS.jsonl: its progress.jsonl, whose `cudaAgent/runFinished` messages
// become the session's runs the view also reads (the attempts list), as the extension keeps them.
// src/results.ts (with roofline.ts, attempts.ts...) is bundled with esbuild,
// the extension's own build tool, and its `resultsHtml` builds the page exactly as the webview gets
// it; the page is then shown in the browser the end-to-end test drives (Debian's chromium, through
// playwright-core from e2e/node_modules: e2e/setup.sh installs it) and captured whole. VS Code's
// webview host gives a page its theme as `--vscode-*` CSS variables; the default Dark Modern values
// of the ones the page reads stand in for them here. Each attempts list is shown opened.
import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { CHROMIUM, CHROMIUM_FLAGS } from "./chromium.mjs";

const require = createRequire(import.meta.url);
const EXT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const NONCE = "replay";
const THEME = `:root {
  --vscode-font-family: system-ui, "Segoe UI", Ubuntu, sans-serif;
  --vscode-editor-font-family: "DejaVu Sans Mono", monospace;
  --vscode-foreground: #cccccc;
  --vscode-descriptionForeground: #9d9d9d;
  --vscode-charts-red: #f14c4c;
  --vscode-charts-blue: #3794ff;
  --vscode-charts-green: #89d185;
  --vscode-charts-yellow: #cca700;
  --vscode-charts-purple: #b180d7;
  --vscode-editorWarning-foreground: #cca700;
}
html { background: #1f1f1f; }
body { font-size: 13px; padding: 0 20px 12px; }`;

function usage(message) {
  console.error(
    `render_results: ${message}\nusage: node e2e/render_results.mjs PAYLOAD.json OUT.png [--session PROGRESS.jsonl] [--width PX]`,
  );
  process.exit(2);
}

function parseArgs(argv) {
  const files = [];
  let width = 1100;
  let session;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--session") {
      session = argv[++i] ?? usage("--session takes the capture's progress.jsonl");
    } else if (argv[i] === "--width") {
      width = Number(argv[++i]);
      if (!Number.isInteger(width) || width < 320) usage("--width takes a whole number of pixels, at least 320");
    } else {
      files.push(argv[i]);
    }
  }
  if (files.length !== 2) usage("give the payload and the PNG to write");
  return { payload: files[0], out: files[1], session, width };
}

/** The session's runs as the extension records them from each `cudaAgent/runFinished`. */
function sessionRuns(file) {
  const runs = [];
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    const record = line.trim() ? JSON.parse(line) : undefined;
    if (record?.method === "cudaAgent/runFinished") {
      const run = record.params;
      runs.push({ uri: run.uri, kernel: run.kernel, optimize: run.optimize, simulated: run.simulated });
    }
  }
  return runs;
}

/** The extension's `resultsHtml`, bundled from src/ as the extension's build bundles it. */
function resultsRenderer() {
  const esbuild = require("esbuild");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "render-results-"));
  try {
    const bundle = path.join(dir, "results.cjs");
    esbuild.buildSync({
      entryPoints: [path.join(EXT, "src", "results.ts")],
      bundle: true,
      outfile: bundle,
      format: "cjs",
      platform: "node",
      target: "node18",
      logLevel: "warning",
    });
    return require(bundle).resultsHtml;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The page as the webview gets it, with the theme's variables the webview host would add. */
function pageHtml(payload, runs) {
  const html = resultsRenderer()(payload, NONCE, runs);
  return html.replace("</head>", `<style nonce="${NONCE}">${THEME}</style></head>`);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  let payload;
  let runs = [];
  try {
    payload = JSON.parse(fs.readFileSync(args.payload, "utf8"));
    runs = args.session ? sessionRuns(args.session) : [];
  } catch (err) {
    usage(err.message);
  }
  if (!Array.isArray(payload?.results) || payload.results.length === 0) {
    usage(`${args.payload}: no results (expected the \`cudaAgent/results\` answer, {"results": [...]})`);
  }
  const html = pageHtml(payload, runs);
  const { chromium } = require("playwright-core");
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS });
  try {
    const page = await browser.newPage({ viewport: { width: args.width, height: 600 }, deviceScaleFactor: 2 });
    await page.setContent(html, { waitUntil: "load" });
    // open each attempts list, as a click on "Attempts: ..." does (each attempt stays folded)
    await page.evaluate(() => document.querySelectorAll("details.attempts").forEach((d) => (d.open = true)));
    await page.screenshot({ path: args.out, fullPage: true });
  } finally {
    await browser.close();
  }
  const kernels = payload.results.map((r) => r.kernel).join(", ");
  console.log(JSON.stringify({ out: path.resolve(args.out), kernels, bytes: fs.statSync(args.out).size }));
}

await main();
