"""The SQLite writers' register: a `Database` knows it was the file's only writer since
its last look, and any other writer (a second `Database`, another process, one that came
and went between two looks) makes it not so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.db.writers import WriterRegister

pytestmark = pytest.mark.sqlite_only

JOIN = (
    "import sys; from app.db.writers import WriterRegister; r = WriterRegister(sys.argv[1]); "
    "print('joined', flush=True); sys.stdin.readline(); r.leave()"
)


def test_one_writer_is_alone_from_its_second_look(tmp_path: Path) -> None:
    register = WriterRegister(str(tmp_path / "s.db"))
    try:
        looks = [register.alone_since_last_look() for _ in range(3)]
    finally:
        register.leave()

    assert looks == [False, True, True]  # the first look has nothing to compare with


def test_a_second_writer_of_this_process_is_another_writer(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    register = WriterRegister(path)
    register.alone_since_last_look()
    second = WriterRegister(path)
    while_two = register.alone_since_last_look()
    second.leave()
    after = [register.alone_since_last_look() for _ in range(2)]
    register.leave()

    assert while_two is False
    assert after == [False, True]  # not alone at the look before: it may have written


def test_a_writer_in_another_process_is_seen(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    register = WriterRegister(path)
    register.alone_since_last_look()
    with subprocess.Popen(
        [sys.executable, "-c", JOIN, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as other:
        assert other.stdout is not None and other.stdin is not None
        assert other.stdout.readline().strip() == "joined"
        looks = [register.alone_since_last_look() for _ in range(2)]
        other.stdin.write("\n")
        other.stdin.flush()
        other.wait(30)
    register.leave()

    assert looks == [False, False]


def test_a_writer_that_came_and_went_between_two_looks_is_seen(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    register = WriterRegister(path)
    register.alone_since_last_look()
    register.alone_since_last_look()
    subprocess.run([sys.executable, "-c", JOIN, path], input="\n", text=True, check=True)
    looks = [register.alone_since_last_look() for _ in range(2)]
    register.leave()

    assert looks == [False, True]
