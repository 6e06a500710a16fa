"""``python -m pmark_impl.cli ARGS`` runs ``pmark ARGS`` (``torchrun … -m pmark_impl.cli evaluate …`` too)."""

import sys

from pmark_impl.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
