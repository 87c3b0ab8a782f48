"""Rillet's Kubernetes API: one subpackage per API version."""
