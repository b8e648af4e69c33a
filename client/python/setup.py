"""Builds the `reach` package: the stubs are generated from the protos at
build time (generate_stubs.py), then packaged with the hand-written modules.
Metadata is in pyproject.toml."""
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate_stubs  # noqa: E402


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        generate_stubs.generate(self.build_lib)


setup(cmdclass={"build_py": BuildWithStubs})
