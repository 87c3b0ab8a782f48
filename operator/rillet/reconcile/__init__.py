"""Pure decisions: naming, planning, diffing, status derivation, App objects and Spark conf.

Plain data in, plain data out, no I/O: no kopf, Kubernetes, Kafka, pyspark, HTTP or subprocess
import (a contract in `.importlinter`), so every decision is unit-tested without a cluster. The
Topic and Table paths (`topics`, `topicconfigs`, `tables`, `claims`, `statuses`), the App's
(`appresolving`, `runresolving`, `runparts`, `manifests`, `sparkdefaults`, `appobjects`,
`appobservations`, `appobserving`, `appstatus`, `appnotes`, `apptargets`, `scaling`,
`scalingdecisions`, `scalingreplays`, `parallelisms`, `checkpointloss`, `kafkaaccess`), what a
reconcile of any of them reports (`notes`), Table servers (`tableservers`) and leader election
(`leases`). Any layer above it (`kafka`, `k8s`, `runtime`, `handlers`, `serving`, `cli`) may
import it; it may import only `driverapi`, `crdgen` and `api`.
"""
