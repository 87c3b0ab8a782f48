"""The operator's own Kubernetes API calls, outside kopf's: server-side apply, writes, leases.

kopf (in `handlers`) watches the Topics, Tables and Apps and patches their status; this package
makes every other call the operator makes: applying the objects of Apps and Table servers
(`applying`), status and Event writes outside a handler (`writing`), the leader's Lease
(`leadership`), waiting for the CRDs to be served (`serving`), and one request through the official
client and its login (`rest`, `login`). It is not the only code that calls the API: the driver
reads its App and annotates its pod (`runtime.pod.incluster`), Spark creates executor pods, `rillet
table get` finds Tables (`tables.clustertables`), and the local stack sets a cluster up. Imported
by `handlers` (and tests); never by `reconcile`, `crdgen` or `api`, nor by its siblings `kafka` and
`runtime`.
"""
