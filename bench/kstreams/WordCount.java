import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;

/**
 * Word count on Kafka Streams: row (e) of bench/pipeline/, the peer users would pick instead
 * of a Rillet App. The same work: split each line into words, count per word (a RocksDB store
 * behind the default record cache), write the changed counts as JSON to a topic.
 *
 * <p>Arguments: bootstrap, source topic, target topic, lines in the source, words in them,
 * processing guarantee (at_least_once or exactly_once_v2), state directory. Prints one JSON line:
 * seconds from start() to the end of close() (every count written and committed), and
 * records/s between 10% and 90% of the words counted (the steady state).
 */
public final class WordCount {
  private WordCount() {}

  public static void main(String[] args) throws InterruptedException {
    String bootstrap = args[0];
    String source = args[1];
    String target = args[2];
    long lines = Long.parseLong(args[3]);
    long words = Long.parseLong(args[4]);
    Properties config = new Properties();
    config.put(StreamsConfig.APPLICATION_ID_CONFIG, "bench-kstreams-" + System.nanoTime());
    config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[5]);
    config.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    config.put(StreamsConfig.STATE_DIR_CONFIG, args[6]);
    config.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");

    // Counted where the words are aggregated (after the repartition topic), so "all counted"
    // means every word reached its store, not only that every line was read.
    AtomicLong counted = new AtomicLong();
    long[] marks = new long[3]; // nanoTime at 10%, 90% and 100% of the words
    Object done = new Object();
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(source, Consumed.with(Serdes.ByteArray(), Serdes.String()))
        .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("[^a-z0-9]+")))
        .filter((key, word) -> !word.isEmpty())
        .selectKey((key, word) -> word)
        .repartition(Repartitioned.with(Serdes.String(), Serdes.String()))
        .peek((word, same) -> mark(counted.incrementAndGet(), words, marks, done))
        .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
        .count(Materialized.as("counts"))
        .toStream()
        .mapValues((word, count) -> "{\"word\":\"" + word + "\",\"count\":" + count + "}")
        .to(target, Produced.with(Serdes.String(), Serdes.String()));

    KafkaStreams streams = new KafkaStreams(builder.build(), config);
    long started = System.nanoTime();
    streams.start();
    synchronized (done) {
      while (marks[2] == 0) {
        done.wait(1_000);
      }
    }
    streams.close(Duration.ofMinutes(2)); // flushes the cache, writes and commits the counts
    long ended = System.nanoTime();
    streams.cleanUp();
    double steady = 0.8 * lines / ((marks[1] - marks[0]) / 1e9);
    System.out.printf(
        Locale.ROOT, "{\"seconds\": %.3f, \"steady\": %.1f}%n", (ended - started) / 1e9, steady);
  }

  private static void mark(long counted, long words, long[] marks, Object done) {
    if (counted == words / 10) {
      marks[0] = System.nanoTime();
    } else if (counted == words * 9 / 10) {
      marks[1] = System.nanoTime();
    } else if (counted == words) {
      synchronized (done) {
        marks[2] = System.nanoTime();
        done.notifyAll();
      }
    }
  }
}
