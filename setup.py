"""Build hook for the compiled parts: the Kafka record key walk (engine/_recordwalk.c) and the
RocketMQ remoting frame codec's common case (gateway_native/remoting/_framecodec.c).

Everything else about the package is in pyproject.toml. The extensions are optional: without a
C compiler the install still succeeds and engine.record_batch and gateway_native.remoting.command
use their Python code.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("engine._recordwalk", ["engine/_recordwalk.c"], optional=True),
    Extension("gateway_native.remoting._framecodec", ["gateway_native/remoting/_framecodec.c"], optional=True),
])
