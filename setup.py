"""Ship the Ansible collection inside the Python package, so ``pip install clustereval`` alone runs
``clustereval evaluate``: the build copies playbooks/, roles/, plugins/, meta/ and the collection's files
into ``clustereval/_collection/ansible_collections/clustereval/gpu`` (``runner.project_root`` finds it).
Everything else is in pyproject.toml."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
COLLECTION_PARTS = ("playbooks", "roles", "plugins", "meta", "galaxy.yml", "ansible.cfg", "README.md", "LICENSE",
                    "requirements.txt", "bindep.txt")
SHIPPED = Path("clustereval", "_collection", "ansible_collections", "clustereval", "gpu")


class BuildWithCollection(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # an editable install runs the checkout's own collection
        dest = Path(self.build_lib) / SHIPPED
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for part in COLLECTION_PARTS:
            source = ROOT / part
            if source.is_dir():
                shutil.copytree(source, dest / part, ignore=ignore)
            elif source.is_file():
                shutil.copy2(source, dest / part)


setup(cmdclass={"build_py": BuildWithCollection})
