"""The controller: one broker, elected through the coordination store, that owns partition leadership and
replica assignment for the cluster."""
