"""What judges kafkalite rather than runs it: the history checker, the fault schedules and the benchmarks.
Nothing in the product imports from here."""
