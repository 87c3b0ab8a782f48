"""The driver as a pod of the App's StatefulSet, beside the operator.

`incluster` reads the pod's settings and runs the loop that watches the App, `scaling` asks Spark
for the executors the operator wants, `reporting` fills the pod's progress annotation and
`terminating` writes the driver's last words. Beside `driver` at the top of the runtime's layers,
independent of it: imported only by the runtime's commands (and tests); it may import
`batches`, not `driver` or `queries`.
"""
