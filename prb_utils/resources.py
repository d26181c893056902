"""Where the shipped folders are: the sample data (``data/``) and the notebooks (``notebooks/``).

The repository's top-level ``data/`` and ``notebooks/`` are the single source of truth. A wheel carries
copies of them as package data (``prb_utils/_bundled/data`` and ``prb_utils/_bundled/notebooks``, made by
the build hook in ``setup.py``). At run time the repository's folders win when the package runs from a
source checkout (an editable install or ``PYTHONPATH``), otherwise the packaged copies are used.

>>> resource_dir("data").joinpath("sample").is_dir()
True
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

FOLDERS = ("data", "notebooks")
BUNDLE = "_bundled"
PROJECT_NAME = 'name = "prb"'


def source_root() -> Path | None:
    """The repository root when the package is imported from a source checkout, else None."""
    root = Path(__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or not all((root / name).is_dir() for name in FOLDERS):
        return None
    return root if PROJECT_NAME in pyproject.read_text(encoding="utf-8") else None


def bundled_dir(name: str) -> Path:
    """The packaged copy of the folder ``name`` (``data`` or ``notebooks``) inside the installed package."""
    _check_name(name)
    folder = resources.files("prb_utils").joinpath(BUNDLE, name)
    return Path(str(folder))


def resource_dir(name: str) -> Path:
    """The folder ``name`` (``data`` or ``notebooks``): the repository's in a source checkout, else the
    packaged copy."""
    _check_name(name)
    root = source_root()
    return root / name if root is not None else bundled_dir(name)


def _check_name(name: str) -> None:
    if name not in FOLDERS:
        raise ValueError(f"Unknown shipped folder {name!r}; expected one of {', '.join(FOLDERS)}.")
