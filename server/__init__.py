"""The language server and the command line: the top layer (server -> agent -> sandbox).

Never imports CuPy, torch, vLLM or Ray: GPU work happens in sandbox worker processes.
"""
