"""Engine exceptions. Each carries a message a person can act on (what limit, which file)."""


class StoreError(Exception):
    """Base class for errors the store reports to its callers."""


class StoreLockedError(StoreError):
    """Another process holds the data directory's ``lock`` file."""


class StoreConfigError(StoreError):
    """A persisted config file (topics, offsets, ...) is unreadable and has no usable backup."""
