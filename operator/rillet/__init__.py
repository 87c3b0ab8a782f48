"""Rillet: a Kubernetes operator for Kafka streaming Apps on Spark, and the runtime its drivers run.

The packages are layers, checked by `.importlinter` (a package imports only those below it; the
ones on one line do not import each other):
- `cli` (a module): the `rillet` command; it may import any package;
- `handlers`, `serving`: the operator's kopf glue; `rillet table serve`;
- `kafka`, `k8s`, `runtime`: Kafka calls; the operator's own Kubernetes calls; the Spark driver;
- `tables`, `reconcile`: a Table read without Spark, and the Table server; pure decisions;
- `crdgen`: the CRDs and API reference, generated from the models;
- `api`: the pydantic models of Topic, Table and App, which every layer may import.
Only `runtime` imports pyspark (the operator's image has none), and no product package imports
the local development stack.
"""
