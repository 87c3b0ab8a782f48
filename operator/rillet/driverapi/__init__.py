"""The operator-driver contract: what the operator hands a Spark driver, and what it hands back.

Pure data and its one reader and one writer each, no I/O: the run spec (`runspecs`), the
driver pod's environment names, paths and ports (`wiring`), the `rillet.io/progress`
annotation the driver writes on its pod (`reports`), the `rillet.io/executors-desired`
annotation the operator writes on it (`desires`), and its termination message
(`terminations`). Both sides import it: the operator
(`reconcile`, `handlers`) to build the driver's objects and read its reports, the runtime
(`runtime`) to run them. It imports neither side (only the API models, pydantic and the
standard library); `.importlinter` enforces it.
"""
