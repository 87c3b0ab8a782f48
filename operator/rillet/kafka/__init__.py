"""The operator's Kafka I/O: topic changes in batches, consumer lag, and App principals and ACLs.

`syncing` brings topics in line in batches (`topicrequests` builds one topic's requests), `lag`
reads the lag of every App's inputs in one round, `principals` makes SCRAM users and ACLs, `admin`
makes the batched admin calls, `errors` tells what their failures mean. Decisions come from
`rillet.reconcile`; this package only carries them out and reports failures as values. Imported
by `handlers` (and bench and tests); never by `reconcile`, `crdgen` or `api`, nor by its siblings
`k8s` and `runtime`. The driver's own Kafka reading and writing is Spark's and `runtime`'s, not
this package's.
"""
