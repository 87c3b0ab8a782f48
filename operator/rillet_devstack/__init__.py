"""The local stack: a real Kubernetes control plane, Kafka (KRaft) and Spark's Kafka connector.

Everything is built or fetched from the package registries this project may reach, cached under a
version-keyed directory outside the repository, and started as plain processes: on 127.0.0.1,
or on the node's address when the stack runs a worker node.
The demo and the integration tests both run on it.
"""
