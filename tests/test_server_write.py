"""`optimize --write`'s file handling (server.cli.files.write_rewrite): symlinks, exact bytes, backups
that never write through a link, mode and owner kept, one clear line and nothing left on failure."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from server.cli.common import JobFailed
from server.cli.files import write_rewrite

RAW = b"// caf\xe9 (latin-1 byte)\n__global__ void k(int* a) {\n    a[0] = 1;\n}\n// \xff end\n"
ORIGINAL = RAW.decode("utf-8", errors="replace")
REWRITTEN = ORIGINAL.replace("a[0] = 1;", "a[0] = 2;")


@pytest.fixture
def cu(tmp_path: Path) -> Path:
    p = tmp_path / "k.cu"
    p.write_bytes(RAW)
    p.chmod(0o640)
    return p


def test_bytes_outside_the_rewrite_are_kept_exactly(cu: Path) -> None:
    written, backup = write_rewrite(cu, ORIGINAL, REWRITTEN)
    assert written == cu and backup == cu.with_name("k.cu.bak")
    assert cu.read_bytes() == RAW.replace(b"a[0] = 1;", b"a[0] = 2;")
    assert backup.read_bytes() == RAW
    assert cu.stat().st_mode & 0o777 == 0o640 and backup.stat().st_mode & 0o777 == 0o640
    assert sorted(x.name for x in cu.parent.iterdir()) == ["k.cu", "k.cu.bak"]  # no temp file


def test_a_symlink_is_followed_to_the_real_file_and_stays_a_link(cu: Path, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    link = tmp_path / "src" / "link.cu"
    link.symlink_to(cu)
    written, backup = write_rewrite(link, ORIGINAL, REWRITTEN)
    assert link.is_symlink() and written == cu
    assert b"a[0] = 2;" in cu.read_bytes() and backup == cu.with_name("k.cu.bak")
    assert list((tmp_path / "src").iterdir()) == [link]


def test_a_symlinked_backup_name_is_never_written_through(cu: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    cu.with_name("k.cu.bak").symlink_to(victim)  # dangling
    cu.with_name("k.cu.bak1").symlink_to(cu)  # pointing at the file itself
    _, backup = write_rewrite(cu, ORIGINAL, REWRITTEN)
    assert backup == cu.with_name("k.cu.bak2") and backup.read_bytes() == RAW
    assert not victim.exists() and b"a[0] = 2;" in cu.read_bytes()


def test_a_thousand_existing_backups_are_fine(cu: Path) -> None:
    for i in range(1000):
        cu.with_name(f"k.cu.bak{i or ''}").write_bytes(b"old")
    _, backup = write_rewrite(cu, ORIGINAL, REWRITTEN)
    assert backup.name == "k.cu.bak1000" and backup.read_bytes() == RAW


def test_a_file_changed_during_the_run_is_not_written(cu: Path) -> None:
    cu.write_bytes(RAW + b"// edited\n")
    with pytest.raises(JobFailed, match="changed during the run"):
        write_rewrite(cu, ORIGINAL, REWRITTEN)
    assert sorted(x.name for x in cu.parent.iterdir()) == ["k.cu"]


def test_a_failed_replace_is_one_line_and_leaves_nothing(cu: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(src: object, dst: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(JobFailed) as err:
        write_rewrite(cu, ORIGINAL, REWRITTEN)
    assert "\n" not in err.value.message and "nothing changed" in err.value.message
    assert "immutable" in err.value.message
    assert sorted(x.name for x in cu.parent.iterdir()) == ["k.cu"] and cu.read_bytes() == RAW


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores folder permissions")
def test_a_read_only_folder_is_one_line_and_leaves_nothing(cu: Path) -> None:
    cu.parent.chmod(0o555)
    try:
        with pytest.raises(JobFailed, match="cannot write"):
            write_rewrite(cu, ORIGINAL, REWRITTEN)
        assert sorted(x.name for x in cu.parent.iterdir()) == ["k.cu"]
    finally:
        cu.parent.chmod(0o755)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_the_owner_is_kept(cu: Path) -> None:
    os.chown(cu, 12345, 12346)
    _, backup = write_rewrite(cu, ORIGINAL, REWRITTEN)
    for p in (cu, backup):
        assert (p.stat().st_uid, p.stat().st_gid) == (12345, 12346)


@pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs root")
def test_an_immutable_file_is_one_line_and_leaves_nothing(cu: Path) -> None:
    if subprocess.run(["chattr", "+i", str(cu)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem has no immutable flag")
    try:
        with pytest.raises(JobFailed, match="cannot write"):
            write_rewrite(cu, ORIGINAL, REWRITTEN)
    finally:
        subprocess.run(["chattr", "-i", str(cu)], check=True)
    assert sorted(x.name for x in cu.parent.iterdir()) == ["k.cu"] and cu.read_bytes() == RAW


def test_the_backup_is_never_more_readable_than_the_original(cu: Path) -> None:
    cu.chmod(0o600)
    old = os.umask(0)  # a permissive umask must not widen the backup
    try:
        _, backup = write_rewrite(cu, ORIGINAL, REWRITTEN)
    finally:
        os.umask(old)
    assert backup.stat().st_mode & 0o777 == 0o600 and cu.stat().st_mode & 0o777 == 0o600


def test_a_folder_refusing_the_temporary_file_is_one_line_and_leaves_nothing(
    cu: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)  # the backup exists by then: it must go too
    with pytest.raises(JobFailed) as err:
        write_rewrite(cu, ORIGINAL, REWRITTEN)
    assert "\n" not in err.value.message and "read-only" in err.value.message
    assert sorted(x.name for x in cu.parent.iterdir()) == ["k.cu"] and cu.read_bytes() == RAW
