"""The bottom layer every package may import: the exception tree and the HTTP toolkit.

- :mod:`base.errors`: the one exception tree (standard library only);
- :mod:`base.http`: what both HTTP services and their clients share (standard library only);
- :mod:`base.asgi`: the server side both services share (the ``worker`` extra).

Layers, bottom first, each importing only those below it: ``base`` <- ``sandbox`` (compile, run,
verify, time; workers) <- ``cudasrc`` (the CUDA source model and kernel specs) <- ``engine`` (the
built-in rewrite engine) <- ``agent`` (the optimize loop, proposers, the LLM client) <- ``learning``
(the learning loop: the reward service) <- ``server`` (the language server and the command line).
``tests/test_layering.py`` enforces the order.
"""
