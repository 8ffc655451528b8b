"""The tests, one package per package of kafkalite.

Packages (an ``__init__.py`` in each folder) give every test module a unique name (``tests.broker.test_x``),
so two folders may hold files of the same name and a test imports another's helpers by full name.
"""
