"""The bottom layer every package may import: the exception tree and the HTTP toolkit.

Layers, bottom first, each importing only those below it: ``base`` <- ``sandbox`` (compile, run,
verify, time; workers) <- ``cudasrc`` (the CUDA source model and kernel specs) <- ``engine`` (the
built-in rewrite engine) <- ``agent`` (the optimize loop, proposers, the LLM client) <- ``learning``
(the reward service) and ``server`` (the language server and the command line).
``tests/test_layering.py`` enforces the order.  Imports nothing beyond the standard library.
"""
