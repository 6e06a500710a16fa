"""``pmark check --out DIR`` on a folder whose only entry is the user's ``.lock`` (issue 24).

Lock files do not count as content, so such a folder was "empty", adopted, and its ``.lock`` truncated to the
run's pid. Now a ``.lock`` holding anything but a pid line is not pmark's: one line, exit status 2, the file
byte-identical and nothing written.
"""

from __future__ import annotations

from proofs_checks import cli


def test_a_users_lock_file_is_refused_and_left_byte_identical(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / ".lock").write_bytes(b"my lock notes\n")
    capsys.readouterr()
    code = cli.main(["--only", "C2", "--out", str(out), "--quick", "--no-progress", "--force"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "is not a lock file of pmark" in err, err
    assert [p.name for p in out.iterdir()] == [".lock"]
    assert (out / ".lock").read_bytes() == b"my lock notes\n"
