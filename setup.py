"""Build hook for the one compiled part: the Kafka record key walk (engine/_recordwalk.c).

Everything else about the package is in pyproject.toml. The extension is optional: without a
C compiler the install still succeeds and engine.record_batch uses its Python walk.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("engine._recordwalk", ["engine/_recordwalk.c"], optional=True)])
