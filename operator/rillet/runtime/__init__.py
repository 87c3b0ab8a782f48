"""What runs inside the Spark driver and its Python workers, in sub-packages that are layers.

`rillet drive` (in a driver pod) and `rillet run` (locally) start an App's driver; the layers
below, checked by `.importlinter` (one imports only those under it; the ones on a line do not
import each other):
- `driver`: the driver of one App: its session, queries, lock, warm-up and checkpoint check,
  and the settings of a local run (`localspark`);
- `pod`: the driver as a pod: its loop beside the App, scaling, progress and last words;
- `queries`: the App's queries: reading its inputs, its pipeline, lookups, writing its outputs;
- `batches`: what a finished micro-batch tells, and what the driver does with it after each;
- `jvm`: the Java Spark runs, its jar's names, and the class-data sharing archive.
Its commands (`rillet run`, `rillet drive`) are in `cli.apps`, and `python -m rillet.runtime`
(`__main__`) starts a driver from a run spec. The only package that may import
pyspark (the operator's image has none). Imported by `cli` (and bench, tests and the local
stack); imports `tables`, `driverapi`, `reconcile` and `api`, never `handlers`, `kafka` or `k8s`.
"""
