"""The remote (object-store) tier of the store: docs/design/tiered-storage.md."""
