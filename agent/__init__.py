"""The optimizer: CUDA source model, kernel specs, proposers (built-in and LLM), the optimize loop.

May import ``sandbox``; never ``server``, pygls or lsprotocol.
"""
