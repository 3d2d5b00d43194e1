"""Compile, run, verify and time candidate kernels in isolated GPU worker processes.

The bottom layer: imports nothing from ``agent`` or ``server`` (nor pygls/lsprotocol).
CuPy is imported only inside worker processes, never at import time of this package.
"""
