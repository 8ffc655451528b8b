"""The group coordinator: which broker coordinates a consumer group, and (later) the group state machine."""
