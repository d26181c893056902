"""Build hook: copy the repository's ``data/`` and ``notebooks/`` into the built package.

The top-level folders stay the single source of truth; a wheel gets copies of them as
``prb_utils/_bundled/{data,notebooks}`` (located at run time by ``prb_utils.resources``). An editable
install copies nothing: it uses the repository's folders directly. Metadata lives in ``pyproject.toml``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
FOLDERS = ("data", "notebooks")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", ".*")


class BuildPyWithBundle(build_py):
    """``build_py`` that also copies the shipped folders into ``<build_lib>/prb_utils/_bundled``."""

    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            self.copy_bundle(Path(self.build_lib) / "prb_utils" / "_bundled")

    def copy_bundle(self, target: Path) -> None:
        """Replace ``target`` with fresh copies of the shipped folders."""
        shutil.rmtree(target, ignore_errors=True)
        for name in FOLDERS:
            source = HERE / name
            if not source.is_dir():
                raise FileNotFoundError(f"{source} is missing; the package cannot be built without it.")
            shutil.copytree(source, target / name, ignore=IGNORED)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        """The built files, the bundled copies included (``install`` records them)."""
        bundle = Path(self.build_lib) / "prb_utils" / "_bundled"
        extra = [str(p) for p in bundle.rglob("*") if p.is_file()] if bundle.is_dir() else []
        return [*super().get_outputs(include_bytecode), *extra]


setup(cmdclass={"build_py": BuildPyWithBundle})
