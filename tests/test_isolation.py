"""A test run leaves no trace in the user's folders: conftest points every per-user folder the code
writes to (trajectories, measured ceilings, caches) at a temporary one, for child processes too."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import ISOLATED

from agent.trajectory import default_path


def test_per_user_folders_are_temporary_here_and_in_child_processes() -> None:
    temp = Path(tempfile.gettempdir()).resolve()
    for name in ISOLATED:
        assert Path(os.environ[name]).resolve().is_relative_to(temp), name
    assert default_path().resolve().is_relative_to(temp)
    assert not default_path().resolve().is_relative_to((Path.home() / ".local").resolve())
    code = "from agent.trajectory import default_path; print(default_path())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert Path(child.stdout.strip()) == default_path()
