"""Deprecated: the offline SageMaker is the ``offline-sagemaker`` distribution, imported as ``offline_sagemaker``.

Up to 0.x the emulator shipped inside this provider as ``airflow_provider_sm_prefs.testing``. It is now a
distribution of its own (``pip install offline-sagemaker``; the provider's ``testing`` extra installs it).
For one release this module keeps the earlier import paths working: importing it warns, and every name and
submodule is the one of :mod:`offline_sagemaker` itself (``airflow_provider_sm_prefs.testing.server`` *is*
``offline_sagemaker.server``), so classes, ``isinstance`` checks and ``except`` clauses agree.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any

NEW_NAME = "offline_sagemaker"
INSTALL = "pip install 'airflow-provider-sm-prefs[testing]' or pip install offline-sagemaker"

try:
    import offline_sagemaker as _target
except ImportError as exc:
    raise ImportError(
        f"{__name__} is now the offline-sagemaker distribution, which is not installed: {INSTALL}, "
        f"then import {NEW_NAME}",
        name=__name__,
    ) from exc

warnings.warn(
    f"{__name__} is deprecated and will be removed in the next release: import {NEW_NAME} instead "
    f"(the offline-sagemaker distribution: {INSTALL})",
    DeprecationWarning,
    stacklevel=2,
)

# A package to the import system, so that its submodules can be imported; the finder below supplies them.
__path__: list[str] = []
__all__ = list(_target.__all__)


def __getattr__(name: str) -> Any:
    return getattr(_target, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _AliasLoader(importlib.abc.Loader):
    """Loads ``airflow_provider_sm_prefs.testing.<name>`` as the module ``offline_sagemaker.<name>``."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.target_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self.target_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing runs again; the import system gave the module this alias's spec: it gets its own back."""
        module.__spec__ = self.target_spec


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds the submodules of this module among those of :mod:`offline_sagemaker`."""

    prefix = f"{__name__}."
    #: Marks the finder across re-imports of this module (one finder on sys.meta_path at most).
    alias_of = NEW_NAME

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(self.prefix):
            return None
        real = NEW_NAME + fullname[len(__name__) :]
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(real))


if not any(getattr(finder, "alias_of", None) == NEW_NAME for finder in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())
