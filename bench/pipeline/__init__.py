"""Benchmark of the Rillet runtime: throughput per core and end-to-end latency, with baselines.

    .venv/bin/python -m bench.pipeline   # needs the local stack (`rillet dev up`)

Every figure is the median of repeated runs on the local stack's broker (127.0.0.1 only), over
the same input: lines of 1 to 8 words in a topic of PARTITIONS partitions. The work is word
count: split each line into words, count per word, write the changed counts to a Table topic.

- (a) the word-count App (examples/wordcount.yaml) on Spark local[1] and local[2], reading the
  whole topic with an availableNow trigger in batches of MAX_OFFSETS records; records/s per
  core = records/s / task slots. Timed from the start of its queries to the end of the last
  batch (the JVM is started before, in its own process);
- (a-hand) the same word count as a hand-written PySpark job (Kafka source, the App's SQL,
  Spark's Kafka writer in update mode), local[1], same session settings: Rillet's own overhead;
- (e) Kafka Streams 4.1.1 (bench/kstreams/WordCount.java, one stream thread, default record
  cache, RocksDB store), at_least_once and exactly_once_v2: the peer users would pick instead.
  Timed from start() to the end of close() (every count written and committed); steady state
  between 10% and 90% of the words counted;
- (a0) Spark's Kafka source alone (a batch count(*) of the topic, local[1], cold and warm):
  what any Spark pipeline is bounded by, next to (d);
- (b) the same work as a plain confluent-kafka loop in one Python process: consume a batch,
  count, produce the changed counts;
- (c) Faust (faust-streaming), one worker, a Table of counts (its changelog gets every update),
  timed from its first record to its FAUST_RECORDS-th (it is too slow for the whole topic);
- (d) Kafka's ConsumerPerformance reading the topic (fetch rate, group join excluded): the
  ceiling of any consumer on this broker;
- formats (`--only formats`): the word count's App over the same lines as JSON values
  (`{"line": ...}`), as Avro records in the Confluent wire format (the local stack's schema
  registry) and as strings (nothing to decode), local[1] and local[2], the formats taking
  turns; Avro/JSON records/s per core against issue 37's target (>= 1.0x);
- (a-eos) against (a): a stateless copy of each line to a Topic, local[1], with the output's
  delivery AtLeastOnce (Spark's Kafka writer) and ExactlyOnce (Kafka transactions):
  what exactly-once costs (`--only delivery`);
- latency p50/p99 (each the median over REPEATS runs) from producing a record to seeing its
  Table update, with a processing-time trigger of TRIGGER_MS, and, for a stateless pipeline
  (topic to topic), with Spark's real-time mode (trigger realTime); and where the
  processing-time batches' time goes, phase by phase (PHASES), p50 and p99 over their batches;
- cold start (`--only coldstart`): seconds from spawning `rillet run` (the word count,
  local[2], COLD_LINES lines waiting) to its queries reading and to its first committed batch,
  on a first start and on a restart from its checkpoint; and from SIGKILL of a running driver
  to a warm standby's (a second `rillet run` on the same checkpoint) first committed batch;
- idle cost (`--only idle`): the cores an idle word-count driver (`rillet run` and its JVM) and
  the broker use over IDLE_SECONDS once its first batch is committed, with Rillet's settings and
  with Spark's default polling delay (10 ms) in the App's sparkConf, alternated.

The machine has 2 cores shared by the broker, the driver and the benchmark itself: per-core
figures are per task slot, not per isolated core.

One module per benchmark (throughput and its baselines, formats, delivery, latency, coldstart,
idle), `settings` for what the command line chooses, `__main__` for the command line.
"""
