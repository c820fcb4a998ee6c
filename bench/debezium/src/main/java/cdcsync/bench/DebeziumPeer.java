package cdcsync.bench;

import java.lang.management.ManagementFactory;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.Driver;
import java.sql.DriverPropertyInfo;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.sql.Statement;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.WorkerConfig;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.MemoryOffsetBackingStore;

import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;

/**
 * The Debezium peer of the bench harness (bench/debezium.go, issue 20): Debezium's
 * MySQL connector, run by the embedded engine, reads one binlog range of the
 * bench's MariaDB and a consumer counts the row change events and discards them.
 *
 * <p>The MySQL connector, not debezium-connector-mariadb: that module is not served
 * by the Maven repository this project builds from, and the MySQL connector reads a
 * MariaDB binlog by file and offset (it finds no GTID_MODE variable and so does not
 * use GTIDs). One thing stops it on MariaDB: it takes MariaDB 10.11's version for a
 * MySQL later than 8.4 and asks for SHOW BINARY LOG STATUS, which MariaDB does not
 * know; MariaDbCompatDriver, the JDBC driver it is given, runs SHOW MASTER STATUS
 * (the same columns) instead. Nothing of the binlog client or the decoding changes.
 *
 * <p>The range starts at --file/--pos: the offset store is preloaded with that
 * position, and snapshot.mode=recovery captures the schema of the table from the
 * server (SHOW CREATE TABLE, no rows) before streaming from the stored offset. The
 * range has no DDL, so the current schema is the schema of every row in it.
 *
 * <p>The range is read --passes times, each by a new engine in the same JVM: the
 * first pass is cold (the JIT compiles while it runs), the later ones warmer; the
 * harness reports the first and the last.
 * Each pass's timer starts when the connector's binlog client is connected (the JVM,
 * the engine and the schema capture come before it) and stops when the consumer has
 * seen --changes row change events. CPU is the whole JVM's
 * (OperatingSystemMXBean.getProcessCpuTime: every thread, GC and JIT included).
 * The figures are printed as one JSON line on stdout; logs go to stderr.
 */
public final class DebeziumPeer {
    static final String ENGINE = "cdcsync-bench-peer";
    static final String PREFIX = "bench";

    /** The offset the engine starts from, set before each engine is built. */
    static volatile Map<String, Object> startOffset;

    /**
     * An in-memory offset store that starts holding startOffset for the connector's
     * partition ({"server": topic.prefix}), serialised as the engine's offset reader
     * looks it up (JSON without schemas, key [engine name, partition]).
     */
    public static final class StartOffsetStore extends MemoryOffsetBackingStore {
        public StartOffsetStore() {
        }

        @Override
        public void configure(WorkerConfig config) {
            super.configure(config);
        }

        @Override
        public synchronized void start() {
            super.start();
            JsonConverter conv = new JsonConverter();
            conv.configure(Map.of("schemas.enable", "false"), false);
            byte[] key = conv.fromConnectData(ENGINE, null, Arrays.asList(ENGINE, Map.of("server", PREFIX)));
            byte[] value = conv.fromConnectData(ENGINE, null, startOffset);
            data.put(ByteBuffer.wrap(key), ByteBuffer.wrap(value));
        }

        @Override
        public Set<Map<String, Object>> connectorPartitions(String connectorName) {
            return Set.of(Map.of("server", PREFIX));
        }
    }

    /**
     * MySQL's JDBC driver with one statement rewritten: SHOW BINARY LOG STATUS (MySQL
     * 8.4's name, which the connector picks for MariaDB 10.11 by its version number)
     * runs as SHOW MASTER STATUS.
     */
    public static final class MariaDbCompatDriver implements Driver {
        private final Driver mysql = new com.mysql.cj.jdbc.Driver();

        public MariaDbCompatDriver() throws SQLException {
        }

        static String rewrite(String sql) {
            return sql.trim().equalsIgnoreCase("SHOW BINARY LOG STATUS") ? "SHOW MASTER STATUS" : sql;
        }

        /** A proxy of target (a Connection or Statement) that rewrites SQL arguments. */
        @SuppressWarnings("unchecked")
        static <T> T wrap(T target, Class<T> iface) {
            InvocationHandler h = (proxy, m, args) -> {
                if (args != null && args.length > 0 && args[0] instanceof String sql && m.getName().matches("execute.*|prepare.*|addBatch")) {
                    args[0] = rewrite(sql);
                }
                Object r;
                try {
                    r = m.invoke(target, args);
                } catch (InvocationTargetException e) {
                    throw e.getCause();
                }
                if (r instanceof Statement st && m.getName().equals("createStatement")) {
                    return wrap(st, Statement.class);
                }
                return r;
            };
            return (T) Proxy.newProxyInstance(DebeziumPeer.class.getClassLoader(), new Class<?>[] {iface}, h);
        }

        @Override
        public Connection connect(String url, Properties info) throws SQLException {
            Connection c = mysql.connect(url, info);
            return c == null ? null : wrap(c, Connection.class);
        }

        @Override
        public boolean acceptsURL(String url) throws SQLException {
            return mysql.acceptsURL(url);
        }

        @Override
        public DriverPropertyInfo[] getPropertyInfo(String url, Properties info) throws SQLException {
            return mysql.getPropertyInfo(url, info);
        }

        @Override
        public int getMajorVersion() {
            return mysql.getMajorVersion();
        }

        @Override
        public int getMinorVersion() {
            return mysql.getMinorVersion();
        }

        @Override
        public boolean jdbcCompliant() {
            return mysql.jdbcCompliant();
        }

        @Override
        public java.util.logging.Logger getParentLogger() throws SQLFeatureNotSupportedException {
            return mysql.getParentLogger();
        }
    }

    /** One pass over the range. */
    static final class Pass {
        long changes;
        double wallS, cpuS, readyS;
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable t) {
            System.err.println("DebeziumPeer: " + t);
            t.printStackTrace();
            // Engine threads must not keep a failed JVM up.
            System.exit(1);
        }
        // Nor lingering ones after a successful run.
        System.exit(0);
    }

    static void run(String[] args) throws Exception {
        Map<String, String> a = parseArgs(args);
        long changes = Long.parseLong(a.get("changes"));
        int passes = Integer.parseInt(a.getOrDefault("passes", "2"));
        long timeoutS = Long.parseLong(a.getOrDefault("timeout", "600"));
        String table = a.getOrDefault("table", "bench.t");

        Map<String, Object> off = new HashMap<>();
        off.put("file", a.get("file"));
        off.put("pos", Long.parseLong(a.get("pos")));
        startOffset = off;

        Properties p = new Properties();
        p.setProperty("name", ENGINE);
        p.setProperty("connector.class", "io.debezium.connector.mysql.MySqlConnector");
        p.setProperty("offset.storage", StartOffsetStore.class.getName());
        p.setProperty("offset.flush.interval.ms", "60000");
        p.setProperty("schema.history.internal", "io.debezium.relational.history.MemorySchemaHistory");
        p.setProperty("database.hostname", a.get("host"));
        p.setProperty("database.port", a.get("port"));
        p.setProperty("database.user", a.get("user"));
        p.setProperty("database.password", a.getOrDefault("password", ""));
        p.setProperty("database.server.id", a.getOrDefault("server-id", "4244"));
        p.setProperty("database.jdbc.driver", MariaDbCompatDriver.class.getName());
        // The bench's go-mysql clients do not use TLS either.
        p.setProperty("database.ssl.mode", "disabled");
        p.setProperty("topic.prefix", PREFIX);
        p.setProperty("database.include.list", table.substring(0, table.indexOf('.')));
        p.setProperty("table.include.list", table);
        // Schema only, from the server, then the binlog from the stored offset;
        // nothing else writes meanwhile, so no lock is needed.
        p.setProperty("snapshot.mode", "recovery");
        p.setProperty("snapshot.locking.mode", "none");
        p.setProperty("schema.history.internal.store.only.captured.tables.ddl", "true");
        p.setProperty("include.schema.changes", "false");
        p.setProperty("tombstones.on.delete", "false");
        // The engine hands the consumer a batch when it is full (2,048
        // records) or after poll.interval.ms: the range's last, partial batch
        // would wait out the default 500 ms inside the timer.
        p.setProperty("poll.interval.ms", "50");
        // Decoding options are Debezium's defaults: DECIMAL as BigDecimal
        // (decimal.handling.mode=precise), temporals as epoch numbers
        // (time.precision.mode=adaptive_time_microseconds), strings as String.

        String topic = PREFIX + "." + table;
        StringBuilder out = new StringBuilder();
        out.append("{\"connector\":\"io.debezium.connector.mysql.MySqlConnector\"");
        out.append(",\"debezium\":\"").append(io.debezium.connector.mysql.Module.version()).append('"');
        out.append(",\"java\":\"").append(System.getProperty("java.vm.name")).append(' ').append(System.getProperty("java.version")).append('"');
        out.append(",\"jvm_start_s\":").append(fmt(ManagementFactory.getRuntimeMXBean().getUptime() / 1e3));
        out.append(",\"passes\":[");
        for (int i = 0; i < passes; i++) {
            Pass r = runPass(p, topic, changes, timeoutS);
            if (i > 0) {
                out.append(',');
            }
            out.append("{\"changes\":").append(r.changes)
                    .append(",\"wall_s\":").append(fmt(r.wallS))
                    .append(",\"cpu_s\":").append(fmt(r.cpuS))
                    .append(",\"ready_s\":").append(fmt(r.readyS)).append('}');
        }
        out.append("],\"process_cpu_s\":").append(fmt(cpuNanos() / 1e9)).append('}');
        System.out.println(out);
        System.out.flush();
    }

    static Pass runPass(Properties props, String topic, long changes, long timeoutS) throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        AtomicReference<Throwable> failed = new AtomicReference<>();
        long[] end = new long[2]; // nanoTime, CPU nanos at the last counted change
        long[] seen = new long[1];
        DebeziumEngine.ChangeConsumer<RecordChangeEvent<SourceRecord>> consumer = (records, committer) -> {
            for (RecordChangeEvent<SourceRecord> e : records) {
                SourceRecord r = e.record();
                if (r.value() != null && topic.equals(r.topic()) && ++seen[0] == changes) {
                    end[0] = System.nanoTime();
                    end[1] = cpuNanos();
                    done.countDown();
                }
                committer.markProcessed(e);
            }
            committer.markBatchFinished();
        };
        DebeziumEngine<RecordChangeEvent<SourceRecord>> engine = DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
                .using(props)
                .notifying(consumer)
                .using((boolean ok, String msg, Throwable err) -> {
                    if (!ok || err != null) {
                        failed.compareAndSet(null, err != null ? err : new RuntimeException(msg));
                    }
                    done.countDown();
                })
                .build();
        ExecutorService ex = Executors.newSingleThreadExecutor();
        long t0 = System.nanoTime();
        ex.execute(engine);
        // The timer starts when the binlog client is connected: the streaming
        // metrics bean's Connected, polled every millisecond.
        MBeanServer mbs = ManagementFactory.getPlatformMBeanServer();
        ObjectName pattern = new ObjectName("debezium.mysql:type=connector-metrics,context=streaming,*");
        long deadline = t0 + TimeUnit.SECONDS.toNanos(timeoutS);
        long start = 0, startCpu = 0;
        while (start == 0) {
            for (ObjectName n : mbs.queryNames(pattern, null)) {
                try {
                    if (Boolean.TRUE.equals(mbs.getAttribute(n, "Connected"))) {
                        start = System.nanoTime();
                        startCpu = cpuNanos();
                    }
                } catch (Exception ignored) {
                    // Not registered yet, or already gone.
                }
            }
            if (start == 0) {
                if (done.getCount() == 0 || System.nanoTime() > deadline) {
                    break;
                }
                Thread.sleep(1);
            }
        }
        boolean finished = start != 0 && done.await(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        try {
            engine.close();
        } catch (IllegalStateException alreadyStopped) {
            // It failed and stopped by itself: failed says why.
        }
        ex.shutdown();
        ex.awaitTermination(60, TimeUnit.SECONDS);
        if (failed.get() != null && seen[0] < changes) {
            throw new RuntimeException("the engine stopped after " + seen[0] + " of " + changes + " row changes", failed.get());
        }
        if (start == 0) {
            throw new RuntimeException("the connector's binlog client did not connect within " + timeoutS + " s (see the log above)");
        }
        if (!finished || seen[0] < changes) {
            throw new RuntimeException("only " + seen[0] + " of " + changes + " row changes arrived within " + timeoutS + " s");
        }
        Pass r = new Pass();
        r.changes = changes;
        r.wallS = (end[0] - start) / 1e9;
        r.cpuS = (end[1] - startCpu) / 1e9;
        r.readyS = (start - t0) / 1e9;
        return r;
    }

    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    static String fmt(double d) {
        return String.format(java.util.Locale.ROOT, "%.6f", d);
    }

    static Map<String, String> parseArgs(String[] args) {
        Map<String, String> m = new HashMap<>();
        for (String s : args) {
            if (!s.startsWith("--") || !s.contains("=")) {
                throw new IllegalArgumentException("arguments are --name=value, not " + s);
            }
            m.put(s.substring(2, s.indexOf('=')), s.substring(s.indexOf('=') + 1));
        }
        for (String k : List.of("host", "port", "user", "file", "pos", "changes")) {
            if (!m.containsKey(k)) {
                throw new IllegalArgumentException("missing --" + k + "=...");
            }
        }
        return m;
    }
}
