"""Rillet's Kubernetes API: one subpackage per API version.

The bottom layer: every other package may import it, and it imports no other Rillet package.
"""
