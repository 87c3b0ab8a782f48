/*
 * The exactly-once writer of Topic outputs, in the executors' JVM
 * (rillet.runtime.queries.transactions calls it from foreachBatch; docs/runtime.md, "Exactly-once").
 *
 * A batch (id b) is split into write units, and unit p is written by one task in one Kafka
 * transaction, with Kafka's Java producer:
 * - the producer's transactional.id is `<group>.<query>.<p>`: starting it fences any older
 *   producer of that id (a task of a killed or paused driver, a lost executor's) and settles the
 *   transaction it left open;
 * - the transaction also commits a marker, offset b+1 of (topic, partition 0) for the group
 *   `<group>.<query>.done.<p>` (sendOffsetsToTransaction), visible exactly when the records are;
 * - before writing, the task reads its marker with a read_committed consumer (which waits for
 *   pending transactional offsets): b+1 or more means unit p of batch b is in Kafka already.
 * A replayed batch must put the same records in unit p as the first time. A unit is the Kafka
 * partition a task read (`<topic>-<partition>`) where the batch's partitions are still Kafka's,
 * else a hash of key and value into as many units as the App has shuffle partitions.
 *
 * Rows never leave the JVM. The writer first ran in Python (confluent-kafka in the Python
 * workers, each row handed over from the JVM), with a shuffle into hashed units for every
 * batch: it halved the throughput of Spark's own Kafka writer.
 */
package rillet.spark;

import java.io.Serializable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.OneToOneDependency;
import org.apache.spark.Partition;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.execution.datasources.v2.DataSourceRDD;
import org.apache.spark.sql.execution.datasources.v2.DataSourceRDDPartition;
import org.apache.spark.sql.kafka010.KafkaBatchInputPartition;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;

public final class TransactionalWriter {
    static final int MARKER_PARTITION = 0;
    static final Duration TIMEOUT = Duration.ofSeconds(60);
    static final int TRANSACTION_TIMEOUT_MS = 60_000;

    private TransactionalWriter() {}

    /**
     * Write the batch's records (columns value, and key and headers if any, as Spark's Kafka
     * sink takes them) once; the number written now (0 for the units written before).
     *
     * @param config the Kafka client's settings (Java names): bootstrap servers and login
     * @param transactionalIdPrefix unit p's transactional.id is this and p
     * @param markerGroupPrefix unit p's marker group is this and p
     * @param hashedUnits how many units a batch is hashed into, when its partitions are not
     *     Kafka's own (see sourceUnits)
     */
    public static long write(
            Dataset<Row> batch,
            long batchId,
            Map<String, String> config,
            String topic,
            String transactionalIdPrefix,
            String markerGroupPrefix,
            int hashedUnits) {
        RDD<InternalRow> rows = batch.queryExecution().toRdd();
        String[] units = sourceUnits(rows);
        if (units == null) {
            Dataset<Row> hashed = batch.repartition(hashedUnits, hashColumns(batch.schema()));
            rows = hashed.queryExecution().toRdd();
        }
        UnitWriter writer = new UnitWriter(
                new HashMap<>(config), topic, transactionalIdPrefix, markerGroupPrefix, batchId,
                Layout.of(batch.schema()), units);
        long written = 0;
        for (long count : rows.toJavaRDD().mapPartitionsWithIndex(writer, false).collect()) {
            written += count;
        }
        return written;
    }

    /**
     * The write unit of each partition of the batch, when each holds the records of one range
     * of one Kafka partition, a different one each: `<topic>-<partition>`. Otherwise null.
     *
     * A replayed batch reads the same offset ranges (Spark logged them), so the unit named after
     * a Kafka partition holds the same records again, whatever order the partitions come in (it
     * changes from one driver to the next). That holds through every narrow step of the query
     * (filters, projections, lookups), so the records need no shuffle: the writer then costs
     * about what Spark's own Kafka writer does. A batch that went through a shuffle (a stateful
     * query), a union, or a Kafka partition split into several ranges, is hashed into units.
     */
    static String[] sourceUnits(RDD<?> rdd) {
        RDD<?> source = rdd;
        while (source.dependencies().size() == 1
                && source.dependencies().head() instanceof OneToOneDependency<?> narrow) {
            source = narrow.rdd();
        }
        if (!(source instanceof DataSourceRDD)) {
            return null;
        }
        Partition[] partitions = source.partitions();
        String[] units = new String[partitions.length];
        Set<String> seen = new HashSet<>();
        for (Partition partition : partitions) {
            if (!(partition instanceof DataSourceRDDPartition read)
                    || read.inputPartition().isEmpty()
                    || !(read.inputPartition().get() instanceof KafkaBatchInputPartition kafka)) {
                return null;
            }
            TopicPartition from = kafka.offsetRange().topicPartition();
            String unit = from.topic() + "-" + from.partition();
            if (!seen.add(unit)) {
                return null;
            }
            units[partition.index()] = unit;
        }
        return units;
    }

    /** A hashed unit holds the records of one hash of their key and value. */
    private static Column[] hashColumns(StructType schema) {
        List<Column> hashed = new ArrayList<>();
        for (String name : new String[] {"key", "value"}) {
            if (schema.getFieldIndex(name).isDefined()) {
                hashed.add(functions.col(name));
            }
        }
        return hashed.toArray(new Column[0]);
    }

    /** Where a row's key, value and headers are, and whether key and value are strings. */
    record Layout(int key, boolean keyIsString, int value, boolean valueIsString, int headers)
            implements Serializable {
        static Layout of(StructType schema) {
            int key = index(schema, "key");
            int value = index(schema, "value");
            if (value < 0) {
                throw new IllegalArgumentException("an output's rows need a value column");
            }
            return new Layout(
                    key,
                    key >= 0 && isString(schema.fields()[key].dataType()),
                    value,
                    isString(schema.fields()[value].dataType()),
                    index(schema, "headers"));
        }

        private static int index(StructType schema, String name) {
            return schema.getFieldIndex(name).isDefined() ? schema.fieldIndex(name) : -1;
        }

        private static boolean isString(DataType type) {
            if (type instanceof StringType) {
                return true;
            }
            if (type instanceof BinaryType) {
                return false;
            }
            throw new IllegalArgumentException("key and value must be string or binary: " + type);
        }

        byte[] key(InternalRow row) {
            return key < 0 ? null : bytes(row, key, keyIsString);
        }

        byte[] value(InternalRow row) {
            return bytes(row, value, valueIsString);
        }

        List<Header> headers(InternalRow row) {
            if (headers < 0 || row.isNullAt(headers)) {
                return Collections.emptyList();
            }
            ArrayData entries = row.getArray(headers);
            List<Header> found = new ArrayList<>(entries.numElements());
            for (int i = 0; i < entries.numElements(); i++) {
                InternalRow entry = entries.getStruct(i, 2);
                byte[] value = entry.isNullAt(1) ? null : entry.getBinary(1);
                found.add(new RecordHeader(entry.getUTF8String(0).toString(), value));
            }
            return found;
        }

        private static byte[] bytes(InternalRow row, int index, boolean isString) {
            if (row.isNullAt(index)) {
                return null;
            }
            return isString ? row.getUTF8String(index).getBytes() : row.getBinary(index);
        }
    }

    /** A task's work: its partition of the repartitioned batch is write unit p. */
    static final class UnitWriter
            implements Function2<Integer, Iterator<InternalRow>, Iterator<Long>> {
        private static final long serialVersionUID = 1L;
        private final HashMap<String, String> config;
        private final String topic;
        private final String transactionalIdPrefix;
        private final String markerGroupPrefix;
        private final long batchId;
        private final Layout layout;
        private final String[] units; // by partition; null: a partition's index is its unit

        UnitWriter(HashMap<String, String> config, String topic, String transactionalIdPrefix,
                String markerGroupPrefix, long batchId, Layout layout, String[] units) {
            this.config = config;
            this.topic = topic;
            this.transactionalIdPrefix = transactionalIdPrefix;
            this.markerGroupPrefix = markerGroupPrefix;
            this.batchId = batchId;
            this.layout = layout;
            this.units = units;
        }

        @Override
        public Iterator<Long> call(Integer partition, Iterator<InternalRow> rows) {
            String unit = units == null ? String.valueOf(partition) : units[partition];
            return Collections.singletonList(writeUnit(unit, rows)).iterator();
        }

        long writeUnit(String unit, Iterator<InternalRow> rows) {
            // Started even for an empty unit: starting the producer of this id aborts what a
            // killed driver's task left open, which would hold read_committed consumers back
            // until it timed out. One per unit and batch, not kept: the unit's next task may run
            // in another executor, whose producer would fence one kept here.
            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerConfig(unit));
            boolean committed = false;
            try {
                producer.initTransactions();
                if (!rows.hasNext()) {
                    return 0;
                }
                Marker marker = Marker.of(config, markerGroupPrefix + unit);
                synchronized (marker) {
                    if (marker.writtenThrough(topic) > batchId) {
                        return 0; // written before, by a driver that did not live to commit it
                    }
                    producer.beginTransaction();
                    long count = produce(producer, rows);
                    TopicPartition done = new TopicPartition(topic, MARKER_PARTITION);
                    producer.sendOffsetsToTransaction(
                            Map.of(done, new OffsetAndMetadata(batchId + 1)),
                            marker.consumer.groupMetadata());
                    producer.commitTransaction();
                    committed = true;
                    return count;
                }
            } catch (RuntimeException e) {
                // Fenced, or nothing open: the next producer of the id settles it either way.
                try {
                    producer.abortTransaction();
                } catch (RuntimeException ignored) {
                    // the failure that got here is the one to report
                }
                throw e;
            } finally {
                // After a commit everything is delivered; after a failure what is left cannot be.
                producer.close(committed ? TIMEOUT : Duration.ZERO);
            }
        }

        private long produce(KafkaProducer<byte[], byte[]> producer, Iterator<InternalRow> rows) {
            AtomicReference<Exception> failed = new AtomicReference<>();
            long count = 0;
            while (rows.hasNext()) {
                InternalRow row = rows.next();
                ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(
                        topic, null, null, layout.key(row), layout.value(row), layout.headers(row));
                producer.send(record, (metadata, error) -> {
                    if (error != null) {
                        failed.compareAndSet(null, error);
                    }
                });
                count++;
            }
            producer.flush();
            if (failed.get() != null) {
                throw new IllegalStateException(
                        "a record of " + topic + " was not written: " + failed.get(), failed.get());
            }
            return count;
        }

        private Properties producerConfig(String unit) {
            Properties properties = new Properties();
            properties.putAll(config);
            properties.put("transactional.id", transactionalIdPrefix + unit);
            properties.put("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS);
            // initTransactions waits up to max.block.ms, and may wait for the transaction an
            // older producer of the id left open to be aborted, which its coordinator may only
            // do once that transaction times out.
            properties.put("max.block.ms", 2 * TRANSACTION_TIMEOUT_MS);
            properties.put("linger.ms", 5);
            // A new producer finds its transaction coordinator, and later the marker group's,
            // and the request that needed it waits retry.backoff.ms before it goes (Kafka's
            // Sender sleeps before any request sent again). At the default 100 ms those two
            // waits were a third of the writer's time per batch (bench/pipeline/, delivery).
            // Real errors still back off, exponentially up to retry.backoff.max.ms (1 s).
            properties.put("retry.backoff.ms", 10);
            properties.put("key.serializer", ByteArraySerializer.class.getName());
            properties.put("value.serializer", ByteArraySerializer.class.getName());
            return properties;
        }
    }

    /** A unit's marker reader: it joins no group, and is kept for the executor's life. */
    static final class Marker {
        private static final Map<String, Marker> KEPT = new ConcurrentHashMap<>();
        final KafkaConsumer<byte[], byte[]> consumer;

        private Marker(KafkaConsumer<byte[], byte[]> consumer) {
            this.consumer = consumer;
        }

        static Marker of(Map<String, String> config, String group) {
            return KEPT.computeIfAbsent(group, ignored -> {
                Properties properties = new Properties();
                properties.putAll(config);
                properties.put("group.id", group);
                properties.put("enable.auto.commit", "false");
                properties.put("isolation.level", "read_committed");
                properties.put("key.deserializer", ByteArrayDeserializer.class.getName());
                properties.put("value.deserializer", ByteArrayDeserializer.class.getName());
                return new Marker(new KafkaConsumer<>(properties));
            });
        }

        /** The number of batches the marker says were written (the last id + 1), 0 if none. */
        long writtenThrough(String topic) {
            TopicPartition marker = new TopicPartition(topic, MARKER_PARTITION);
            Map<TopicPartition, OffsetAndMetadata> found =
                    consumer.committed(Set.of(marker), TIMEOUT);
            OffsetAndMetadata offset = found.get(marker);
            return offset == null ? 0 : offset.offset();
        }
    }
}
