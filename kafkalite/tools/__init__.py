"""Command-line tools: segment dumps and friends (logic for ``kafkalite.cli``)."""
