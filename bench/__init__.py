"""Rillet's benchmarks, run by hand against the local stack (`python -m bench.<name>`, see the
README); nothing in the product or the tests imports them."""
