"""The client side: what a producer decides before a record reaches a broker."""
