"""The CUDA source model: a ``.cu`` file parsed, its kernels, launches, specs and host program.

May import ``base`` and ``sandbox`` (the contract, the expression grammar); never ``engine``,
``agent``, ``server``, pygls or lsprotocol.
"""
