"""Rillet."""
