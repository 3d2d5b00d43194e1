"""The ``cuda-agent`` command line: the top layer, beside the language server.

Each subcommand is a thin wrapper: parse options, call into ``agent``/``sandbox``/``server``,
render the result for humans (default) or as JSON (``--json``).  Heavy modules are imported
inside the commands so ``cuda-agent --help`` stays instant and ``serve`` never loads CuPy.

User mistakes (missing file, unknown kernel, bad option) print one line on stderr and exit
with status 2; a failed job exits 1; never a traceback.
"""
