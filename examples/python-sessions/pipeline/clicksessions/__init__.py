"""Click events into per-user visits: the pipeline (`sessions.build`) and the UDF it applies in
the executors' Python workers (`sections.section_of`)."""
