"""Where the shipped folders are: the sample data (``data/``) and the notebooks (``notebooks/``).

The repository's top-level ``data/`` and ``notebooks/`` are the single source of truth. A wheel carries
copies of them as package data (``prb_utils/_bundled/data`` and ``prb_utils/_bundled/notebooks``, made by
the build hook in ``setup.py``). At run time the repository's folders win when the package runs from a
source checkout (an editable install or ``PYTHONPATH``), otherwise the packaged copies are used.

>>> resource_dir("data").joinpath("sample").is_dir()
True
"""

from __future__ import annotations

import subprocess
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


def source_commit() -> str | None:
    """The commit of the source checkout the package is imported from (``git rev-parse HEAD``, with ``+changes``
    when its tracked files differ from it), or None (an installed wheel, no git, not a repository)."""
    root = source_root()
    if root is None or not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+changes" if head and dirty else head or None
