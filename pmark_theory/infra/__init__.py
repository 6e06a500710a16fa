"""The toolkit's infrastructure, apart from the exact laws: user files, output paths, owned folders, locks, plug-ins.

Nothing here is a law or a rule of a scheme; every package of the toolkit uses it to touch the user's machine
safely:

* :mod:`~pmark_theory.infra.files` — reading a user's file with a bound (regular files, strict UTF-8) and writing
  an output atomically (``write_atomic``);
* :mod:`~pmark_theory.infra.paths` — refusing, before any work, outputs that alias an input or each other;
* :mod:`~pmark_theory.infra.owned` (with ``owned_folder``, ``owned_marker``, ``owned_legacy``, ``owned_fs``) — a
  folder the toolkit owns: a marker and a manifest of the files it wrote, the only files ``--force`` deletes;
* :mod:`~pmark_theory.infra.lock` — the exclusive lock around a folder's writes;
* :mod:`~pmark_theory.infra.plugins` — user code runs only as a registered plug-in (``@plugin(kind)`` or an
  entry point);
* :mod:`~pmark_theory.infra.json` — strict JSON (a repeated member or ``NaN`` refused).

The modules are imported by path (``pmark_theory.infra.files``); :func:`~pmark_theory.infra.plugins.plugin` is
also re-exported by :mod:`pmark_theory`.
"""
