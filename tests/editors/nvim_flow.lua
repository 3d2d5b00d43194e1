-- Neovim (0.7+, built-in LSP client, no plugins) driving `cuda-agent serve` headless:
-- a long Optimize with progress, its result applied through the "Apply verified rewrite" code
-- action (one confirmation: choosing it), then a second Optimize cancelled by command.
-- Run by tests/test_editors.py: nvim --headless -u NONE -c "luafile nvim_flow.lua"
-- Environment: CUDA_AGENT_FILE (the .cu file), CUDA_AGENT_PYTHON, CUDA_AGENT_OUT (JSON result).
local out = {progress = {}, log = {}, messages = {}}
local file = os.getenv("CUDA_AGENT_FILE")
local finished = {}

local function write_out()
  local f = io.open(os.getenv("CUDA_AGENT_OUT"), "w")
  f:write(vim.fn.json_encode(out))
  f:close()
end

local function wait(ms, what, cond)
  if not vim.wait(ms, cond, 50) then
    error("timed out waiting for " .. what)
  end
end

local function main()
  vim.cmd("edit " .. file)
  local bufnr = vim.api.nvim_get_current_buf()
  local uri = vim.uri_from_bufnr(bufnr)
  local client_id = vim.lsp.start_client({
    name = "cuda-agent",
    cmd = {os.getenv("CUDA_AGENT_PYTHON"), "-m", "server", "serve"},
    root_dir = vim.fn.fnamemodify(file, ":h"),
    handlers = {
      ["$/progress"] = function(_, result)
        table.insert(out.progress, result.value)
      end,
      ["window/logMessage"] = function(_, result)
        table.insert(out.log, result.message)
      end,
      ["window/showMessage"] = function(_, result)
        table.insert(out.messages, result.message)
      end,
      ["cudaAgent/runFinished"] = function(_, result)
        finished[result.runId] = result
      end,
    },
  })
  vim.lsp.buf_attach_client(bufnr, client_id)
  local client = vim.lsp.get_client_by_id(client_id)
  wait(30000, "the server to initialize", function() return client.initialized end)
  out.work_done_progress = vim.lsp.protocol.make_client_capabilities().window.workDoneProgress

  local function command(name, args)
    local res = client.request_sync("workspace/executeCommand", {command = name, arguments = args}, 10000, bufnr)
    if not res or res.err then
      error(name .. ": " .. vim.inspect(res))
    end
    return res.result
  end

  -- 1. a long Optimize: answers at once, progress meanwhile, then the result
  local t0 = vim.loop.hrtime()
  local started = command("cudaAgent.optimize", {{uri = uri, kernel = "saxpy"}})
  out.started = started
  out.answered_s = (vim.loop.hrtime() - t0) / 1e9
  wait(120000, "the optimize run to finish", function() return finished[started.runId] ~= nil end)
  out.optimize_s = (vim.loop.hrtime() - t0) / 1e9
  out.finished = finished[started.runId]

  -- 2. apply it: the code action on the kernel (the one confirmation is choosing it)
  local line = vim.fn.search("void saxpy(", "n") - 1
  local params = {
    textDocument = {uri = uri},
    range = {start = {line = line, character = 0}, ["end"] = {line = line, character = 0}},
    context = {diagnostics = {}},
  }
  local actions = client.request_sync("textDocument/codeAction", params, 10000, bufnr).result or {}
  out.actions = vim.tbl_map(function(a) return a.title end, actions)
  local apply = actions[1]
  out.applied = command(apply.command.command, apply.command.arguments)
  wait(10000, "the edit to reach the buffer", function()
    return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n"):find("__restrict__") ~= nil
  end)
  out.text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
  out.modified = vim.bo[bufnr].modified

  -- 3. another Optimize, cancelled by command once progress has been reported
  local seen = #out.progress
  local second = command("cudaAgent.optimize", {{uri = uri, kernel = "saxpy"}})
  wait(30000, "progress of the second run", function()
    for i = seen + 1, #out.progress do
      if out.progress[i].kind == "report" then return true end
    end
    return false
  end)
  out.cancel = command("cudaAgent.cancel", {{runId = second.runId}})
  wait(30000, "the cancelled run to finish", function() return finished[second.runId] ~= nil end)
  out.cancelled = finished[second.runId]
  client.stop()
end

local ok, err = pcall(main)
out.error = ok and vim.NIL or tostring(err)
write_out()
vim.cmd(ok and "qall!" or "cquit!")
