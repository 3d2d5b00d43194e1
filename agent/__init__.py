"""The optimizer: proposers (built-in and LLM), the optimize loop and the runs it orchestrates.

May import ``base``, ``sandbox``, ``cudasrc`` and ``engine``; never ``learning``, ``server``,
pygls or lsprotocol.
"""
