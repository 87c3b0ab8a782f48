"""What runs inside the Spark driver and its Python workers, and the pyspark-free Table readers.

`rillet drive` (in a driver pod, `incluster`) and `rillet run` (locally) build a session
(`driving`), read the inputs (`reading`, `records`), run the pipeline (`pipelines`, `statements`),
write the outputs (`writing`, `transactions`), join lookups (`lookups`, `pinning`), scale executors
on the operator's word (`scaling`) and report progress to it (`reporting`); `localspark` holds
the settings of a local run. `tables`, `tablestore` and `clustertables` read a Table without
Spark, for `rillet table` and the Table server (`serving`) too. The only package that may import
pyspark (the operator's image has none), so what `serving` imports from it never imports
pyspark. Imported by `serving` and `cli` (and bench, tests and the local stack); imports only
`reconcile` and `api`, never `handlers`, `kafka` or `k8s`.
"""
