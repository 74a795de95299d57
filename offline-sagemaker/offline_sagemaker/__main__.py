"""``python -m offline_sagemaker``: the ``offline-sagemaker`` command."""

from __future__ import annotations

import sys

from offline_sagemaker.cli import main

if __name__ == "__main__":
    sys.exit(main())
