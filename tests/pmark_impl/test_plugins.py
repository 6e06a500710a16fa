"""Plug-ins are explicit (issue 24): only objects marked ``@plugin(kind)`` or declared as entry points are loaded;
anything else is refused, before it is called, with a message saying how to register one."""

from __future__ import annotations

import subprocess
import sys

import pytest
from _plugin_helpers import (
    SENTINEL_ENV,
    Liar,
    Marked,
    Unmarked,
    forget_modules,
    install_distribution,
    liar,
    shout,
    wipe,
)

from pmark_theory._validate import PMarkValueError
from pmark_theory.infra.plugins import (
    MARKER,
    PLUGIN_KINDS,
    PluginError,
    entry_point_group,
    is_plugin,
    load_plugin,
    parse_plugin_spec,
    plugin,
    plugin_entry_points,
)


@pytest.fixture
def sentinel(tmp_path, monkeypatch):
    """The file :func:`_plugin_helpers.wipe` writes if it is ever called."""
    path = tmp_path / "wipe-was-called"
    monkeypatch.setenv(SENTINEL_ENV, str(path))
    return path


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A throw-away site folder: write distributions into it, then call ``activate()`` to put it on sys.path."""
    root = tmp_path / "site"
    root.mkdir()

    def activate():
        monkeypatch.syspath_prepend(str(root))

    yield root, activate
    forget_modules("pmark_demo_")


def test_the_decorator_marks_the_object_itself():
    def f(text, rng):
        return text

    assert plugin("attack")(f) is f
    assert getattr(f, MARKER) == "attack"
    assert is_plugin(f, "attack") and not is_plugin(f, "scheme")
    assert is_plugin(shout, "attack") and not is_plugin(wipe, "attack")
    assert plugin("attack")(f) is f  # marking twice with the same kind is harmless
    with pytest.raises(PluginError, match="already a plug-in of kind 'attack'"):
        plugin("scheme")(f)


def test_only_an_own_marker_counts():
    assert is_plugin(Marked, "attack")
    assert not is_plugin(Unmarked, "attack")  # inherited through the class, not registered itself
    assert getattr(liar, MARKER) == "attack"  # what a plain getattr would believe
    assert not is_plugin(liar, "attack") and not is_plugin(Liar, "attack")


def test_kinds_and_unmarkable_objects():
    assert dict(PLUGIN_KINDS) == {
        "attack": "pmark.attacks",
        "proxy": "pmark.proxies",
        "scheme": "pmark.schemes",
        "audit_target": "pmark.audit_targets",
    }
    assert entry_point_group("scheme") == "pmark.schemes"
    for bad in ("attacks", "", None, 3):
        with pytest.raises(PluginError, match="plug-in kind must be one of"):
            plugin(bad)
    with pytest.raises(PluginError, match="cannot be marked"):
        plugin("attack")(len)  # a builtin takes no attributes
    assert issubclass(PluginError, PMarkValueError)


@pytest.mark.parametrize("target", ["wipe", "liar", "Unmarked", "Liar"])
def test_an_unregistered_object_is_refused_before_it_is_called(sentinel, target):
    spec = f"_plugin_helpers:{target}"
    with pytest.raises(PluginError) as info:
        load_plugin(spec, "attack")
    msg = str(info.value)
    assert "\n" not in msg and f"'{spec}' is refused" in msg
    assert "@plugin('attack')" in msg and "'pmark.attacks'" in msg  # how to register one
    assert not sentinel.exists()


def test_registered_objects_load():
    assert load_plugin("_plugin_helpers:shout", "attack") is shout
    assert load_plugin("_plugin_helpers:Marked", "attack") is Marked
    with pytest.raises(PluginError, match="not registered as a scheme plug-in"):
        load_plugin("_plugin_helpers:shout", "scheme")


def test_the_standard_library_is_refused_without_being_imported():
    """``antigravity`` opens a web browser when imported: it must not even be imported."""
    code = (
        "import sys\n"
        "from pmark_theory.infra.plugins import load_plugin, PluginError\n"
        "for spec in ('antigravity:fly', 'shutil:rmtree', 'os:system', 'this:s'):\n"
        "    try:\n"
        "        load_plugin(spec, 'attack')\n"
        "    except PluginError as e:\n"
        "        assert 'standard library' in str(e), e\n"
        "    else:\n"
        "        raise SystemExit(spec + ' loaded')\n"
        "assert 'antigravity' not in sys.modules and 'this' not in sys.modules\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize(
    "spec",
    ["", ":", "mod:", ":attr", "a b:c", "../x:y", "os.path:join()", "m:f;g", "x" * 400 + ":y", 3, None],
)
def test_malformed_names_are_refused(spec):
    with pytest.raises(PluginError):
        parse_plugin_spec(spec)
    with pytest.raises(PluginError):
        load_plugin(spec, "attack")


def test_missing_modules_and_attributes():
    with pytest.raises(PluginError, match="cannot import 'pmark_no_such_module_xyz'"):
        load_plugin("pmark_no_such_module_xyz:f", "attack")
    with pytest.raises(PluginError, match="_plugin_helpers has no attribute 'nope'"):
        load_plugin("_plugin_helpers:nope", "attack")
    with pytest.raises(
        PluginError, match=r"no attack plug-in is named 'nope' \(entry points in 'pmark.attacks'"
    ):
        load_plugin("nope", "attack")


EP_MODULE = """
def reverse(text, rng):
    return " ".join(reversed(text.split()))

def helper(text, rng):
    raise AssertionError("never registered, never called")
"""


def test_entry_points_are_listed_without_import_and_loaded_when_named(site):
    root, activate = site
    install_distribution(
        root, "pmark_demo_dist", {"demo-reverse": "pmark_demo_ep1:reverse"}, {"pmark_demo_ep1": EP_MODULE}
    )
    assert "demo-reverse" not in plugin_entry_points("attack")
    activate()
    assert plugin_entry_points("attack") == {"demo-reverse": ("pmark_demo_ep1:reverse",)}
    assert plugin_entry_points("scheme") == {}
    assert "pmark_demo_ep1" not in sys.modules  # listed, not imported
    fn = load_plugin("demo-reverse", "attack")
    assert fn("a b c", None) == "c b a" and not is_plugin(fn, "attack")  # the entry point registers it
    assert load_plugin("pmark_demo_ep1:reverse", "attack") is fn  # its target, by module:function, too
    with pytest.raises(PluginError, match="'pmark_demo_ep1:helper' is refused"):
        load_plugin("pmark_demo_ep1:helper", "attack")  # same module, not declared


def test_a_name_declared_twice_with_different_targets_is_refused(site):
    root, activate = site
    install_distribution(
        root, "pmark_demo_a", {"demo-x": "pmark_demo_ep2:reverse"}, {"pmark_demo_ep2": EP_MODULE}
    )
    install_distribution(root, "pmark_demo_b", {"demo-x": "pmark_demo_ep2:helper"}, {})
    activate()
    assert plugin_entry_points("attack") == {"demo-x": ("pmark_demo_ep2:helper", "pmark_demo_ep2:reverse")}
    with pytest.raises(PluginError, match="declared with different targets"):
        load_plugin("demo-x", "attack")
    assert "pmark_demo_ep2" not in sys.modules


def test_an_entry_point_that_fails_to_import_is_one_line(site):
    root, activate = site
    install_distribution(
        root,
        "pmark_demo_c",
        {"demo-broken": "pmark_demo_ep3:f"},
        {"pmark_demo_ep3": "raise RuntimeError('boom')\n"},
    )
    activate()
    with pytest.raises(PluginError, match=r"demo-broken.*raised RuntimeError: boom"):
        load_plugin("demo-broken", "attack")
