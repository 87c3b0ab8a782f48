/*
 * A Spark plugin (spark.plugins) that initializes, in a thread of its own as each driver and
 * executor JVM starts, the classes whose static initializers the first batch's tasks would
 * otherwise run (docs/runtime.md, "Starting"). Which classes: the comma-separated list in
 * spark.rillet.warmup.classes, which Rillet derives from the App's pipeline (reconcile.sparkdefaults.warmup_classes).
 *
 * CollationAwareUTF8String builds, the first time any task calls lower(), upper() or initcap()
 * (ICU case mappings, Spark's default), a map of the title case of every Unicode code point:
 * about 1 s of one core, measured in the word count's first batch with Java Flight Recorder.
 * Started with the JVM, that second overlaps with the session's and the queries' start, or an
 * executor's registration; a task that reaches the class meanwhile waits only for the rest.
 */
package rillet.spark;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;

import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public final class WarmupPlugin implements SparkPlugin {
    static final String CLASSES_KEY = "spark.rillet.warmup.classes";

    private static final Logger LOG = LoggerFactory.getLogger(WarmupPlugin.class);
    // A local master runs the driver's and the executor's plugin in one JVM: one warm-up.
    private static final AtomicBoolean STARTED = new AtomicBoolean();

    @Override
    public DriverPlugin driverPlugin() {
        return new DriverPlugin() {
            @Override
            public Map<String, String> init(SparkContext context, PluginContext plugin) {
                start(plugin.conf());
                return Collections.emptyMap();
            }
        };
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new ExecutorPlugin() {
            @Override
            public void init(PluginContext plugin, Map<String, String> extraConf) {
                start(plugin.conf());
            }
        };
    }

    private static void start(SparkConf conf) {
        List<String> classes = Arrays.stream(conf.get(CLASSES_KEY, "").split(","))
            .map(String::trim)
            .filter(name -> !name.isEmpty())
            .collect(Collectors.toList());
        if (classes.isEmpty() || !STARTED.compareAndSet(false, true)) {
            return;
        }
        Thread thread = new Thread(() -> initialize(classes), "rillet-warmup");
        thread.setDaemon(true);
        thread.start();
    }

    private static void initialize(List<String> classes) {
        ClassLoader loader = WarmupPlugin.class.getClassLoader();
        for (String name : classes) {
            long started = System.nanoTime();
            try {
                Class.forName(name, true, loader);
                LOG.info("warm-up: initialized {} in {} ms", name, (System.nanoTime() - started) / 1_000_000);
            } catch (ClassNotFoundException | LinkageError e) {
                // Another Spark version: its first task initializes what it has, as before.
                LOG.info("warm-up: {} not initialized: {}", name, e.toString());
            }
        }
    }
}
