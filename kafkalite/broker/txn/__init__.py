"""The transaction coordinator and its log, ``__transaction_state``."""
