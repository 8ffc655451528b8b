"""Plotting and widget helpers used by the book's chapters."""
