"""``pmark audit``: bad targets get one line naming the target and the call (exit 2); the folder rules; resume.

Every refusal happens before the report folder is written (the target is loaded and its first calls made by the
reproducibility part, before any statistic), except a detector that breaks the protocol, which is found when the
null part first calls it — the parts already computed stay cached and nothing else is written.
"""

from __future__ import annotations

import json

import pytest

from pmark_impl import cli
from pmark_impl.audit import AuditConfig, audit, tiny_env
from pmark_impl.audit import _run as audit_run

T = "tests.audit._targets"
SMALL = ["--keys", "2", "--texts", "4", "--sentences", "2", "--samples", "10", "--no-progress"]


def _main(capsys, *argv):
    capsys.readouterr()
    rc = cli.main(["audit", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("no_such_module_xyz:make", ["no_such_module_xyz"]),
        (f"{T}:unregistered", ["unregistered", "plugin"]),
        (f"{T}:no_detect", ["no_detect", "detect()"]),
        (f"{T}:bad_claim", ["bad_claim", "unbiased"]),
        (f"{T}:factory_raises", ["factory_raises", "factory(env)", "ImportError"]),
        (f"{T}:raises_generate", ["raises_generate", "generate(", "RuntimeError", "boom"]),
        (f"{T}:nan_detect", ["nan_detect", "detect(", "NaN"]),
        (f"{T}:p_above_one", ["p_above_one", "detect(", "outside [0, 1]"]),
        (f"{T}:string_detect", ["string_detect", "detect(", "str, not a number"]),
        (f"{T}:raises_detect", ["raises_detect", "detect(", "ZeroDivisionError"]),
        ("not-a-scheme", ["not-a-scheme"]),
    ],
)
def test_bad_targets_one_line_exit_2(capsys, tmp_path, target, words):
    rc, _, err = _main(capsys, target, "--out", str(tmp_path / "rep"), *SMALL)
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("pmark: error: "), err
    for w in words:
        assert w in err, (w, err)
    assert not (tmp_path / "rep" / "results.json").exists()


def test_a_hanging_call_is_stopped_by_the_time_limit(capsys, tmp_path):
    rc, _, err = _main(
        capsys, f"{T}:hangs_detect", "--out", str(tmp_path / "rep"), "--timeout", "0.5", *SMALL
    )
    assert rc == 2 and "hangs_detect" in err and "did not return within 0.5 s" in err


def test_bad_options_exit_2_before_anything(capsys, tmp_path):
    rc, _, err = _main(capsys, f"{T}:fixed", "--out", str(tmp_path / "r"), "--alpha", "1.5")
    assert rc == 2 and "alpha" in err
    rc, _, err = _main(capsys, f"{T}:fixed", "--out", str(tmp_path / "r"), "--set", "gamma=0.3", *SMALL)
    assert rc == 2 and "schemes only" in err
    assert not (tmp_path / "r").exists()


def test_foreign_folder_refused_and_complete_report_kept(capsys, tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    rc, _, err = _main(capsys, f"{T}:fixed", "--out", str(foreign), *SMALL)
    assert rc == 2 and (foreign / "notes.txt").read_text() == "mine"
    rc, _, err = _main(capsys, f"{T}:fixed", "--out", str(foreign), "--force", *SMALL)
    assert rc == 2 and (foreign / "notes.txt").read_text() == "mine"

    rep = tmp_path / "rep"
    rc, _, err = _main(capsys, f"{T}:fixed", "--out", str(rep), *SMALL)
    assert rc == 0, err
    assert {p.name for p in (rep / "figures").iterdir()} == {
        "distortion.png",
        "null.png",
        "power.png",
        "leakage.png",
    }
    doc = json.loads((rep / "results.json").read_text())
    assert doc["passed"] is True and doc["target"] == f"{T}:fixed"
    assert "| same seed, same bytes | yes | holds |" in (rep / "report.md").read_text()
    rc, _, err = _main(capsys, f"{T}:fixed", "--out", str(rep), *SMALL)
    assert rc == 2 and "--force" in err
    rc, _, err = _main(capsys, f"{T}:fixed", "--out", str(rep), "--force", *SMALL)
    assert rc == 0, err


def test_an_interrupted_audit_resumes_from_its_parts(capsys, tmp_path, monkeypatch):
    rep = tmp_path / "rep"

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(audit_run, "run_power", interrupted)
    rc, _, err = _main(capsys, f"{T}:fixed", "--out", str(rep), *SMALL)
    assert rc == 130 and not (rep / "results.json").exists()
    assert {p.name for p in (rep / "parts").iterdir()} == {
        "reproducibility.json",
        "distortion.json",
        "null.json",
    }
    monkeypatch.undo()

    def must_not_run(*a, **k):
        raise AssertionError("a finished part was recomputed")

    for name in ("run_repro", "run_distortion", "run_null"):
        monkeypatch.setattr(audit_run, name, must_not_run)
    # another configuration is another audit: nothing cached is reused for it (an internal error: exit 3, not 1)
    rc, _, err = _main(capsys, f"{T}:fixed", "--out", str(rep), *SMALL[:-1], "--seed", "1", "--no-progress")
    assert rc == 3 and "a finished part was recomputed" in err and "internal error of pmark audit" in err
    # the same configuration resumes: the three finished parts are read back
    rc, _, err = _main(capsys, f"{T}:fixed", "--out", str(rep), *SMALL)
    assert rc == 0, err
    # --force starts afresh: the cached parts are deleted and recomputed
    rc, _, err = _main(capsys, f"{T}:fixed", "--out", str(rep), "--force", *SMALL)
    assert rc == 3 and "a finished part was recomputed" in err


def test_same_seed_same_report(tmp_path):
    config = AuditConfig(
        keys=2,
        texts=4,
        sentences=2,
        distortion_samples=10,
        power_keys=1,
        power_texts=2,
        leakage_queries=(16,),
    )
    env = tiny_env()
    a = audit(f"{T}:fixed", env, config).to_dict()
    b = audit(f"{T}:fixed", env, config).to_dict()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_a_real_lm_audit_uses_two_sample_tests(capsys, tmp_path, monkeypatch):
    """``--lm``: the model loaders are called after the target is resolved; no exact law, so distortion is tested
    by two-sample tests and a claimed exact law is reported as untested (not passed)."""
    from tests.pmark_impl._impl_fakes import install_fake_models, universe

    calls = install_fake_models(monkeypatch, universe(12), dim=16)
    rc, _, err = _main(
        capsys, "no_such_module_xyz:t", "--lm", "some/model", "--out", str(tmp_path / "r"), *SMALL
    )
    assert rc == 2 and calls == {"encoder": [], "sampler": []}
    rc, _, err = _main(capsys, f"{T}:fixed", "--encoder", "x", "--out", str(tmp_path / "r"), *SMALL)
    assert rc == 2 and "--encoder needs --lm" in err
    rep = tmp_path / "real"
    rc, _, err = _main(capsys, "offline", "--lm", "some/model", "--n", "8", "--out", str(rep), *SMALL)
    assert rc == 0, err
    assert calls["sampler"] == ["some/model"]
    doc = json.loads((rep / "results.json").read_text())
    dist = doc["parts"]["distortion"]
    assert dist["mode"] == "two-sample" and set(dist["tests"]) == {"energy", "length", "repeats"}
    untested = [v for v in doc["verdicts"] if v["claim"] == "exact-law"]
    assert untested and untested[0]["status"] == "untested"
