"""The failover controller (``docs/design/failover.md``): who is the master of each broker group.

- ``state``: the decisions as a pure state machine (registrations, elections from the
  SyncStateSet, SyncStateSet changes); no I/O, no clock;
- ``raft``: pysyncobj replicates that state machine's commands between the controller peers;
- ``lease``: the master's lease, the clock side of fencing (used by the broker).

No client protocol is known here: the NameServer and the broker speak remoting around it.
"""
