"""The ``rockafka`` command: wires the engine and both gateways into one node.

This package is the application layer. It may import ``engine`` and both gateways; nothing
imports it back (the layering test checks that too).
"""

__version__ = "0.1.0"
