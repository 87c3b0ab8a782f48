"""The only code that talks to the Kubernetes API directly (outside kopf's own machinery)."""
