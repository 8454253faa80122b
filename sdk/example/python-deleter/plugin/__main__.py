"""Entry point: `python3 plugin` in development, or the zipapp
(`python3 -m zipapp plugin -p "/usr/bin/env python3" -o lifecycled-plugin-sqlite.pyz`),
one file that lifecycled's sha256 check can cover whole."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import deleter  # noqa: E402

deleter.main()
