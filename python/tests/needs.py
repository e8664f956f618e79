"""What a test compares andes with, or drives it with, from PyPI."""

import importlib
import os
from typing import Any

import pytest


def needed(module: str, package: str) -> Any:
    """``module`` imported, from PyPI's ``package``. A test that needs it and
    cannot have it fails: it reports NOT RUN and is skipped only under
    ``ANDES_ALLOW_NOT_RUN=1`` (a test that ran nothing never passes)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("ANDES_ALLOW_NOT_RUN"):
            pytest.skip(f"NOT RUN: {package} (pip install {package})")
        raise
