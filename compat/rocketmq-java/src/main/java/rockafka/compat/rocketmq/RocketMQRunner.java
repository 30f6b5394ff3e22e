package rockafka.compat.rocketmq;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Properties;

/**
 * Entry point of the stock Apache RocketMQ Java client runner (remoting protocol).
 *
 * <p>Usage: {@code java -jar rocketmq-runner.jar --namesrv HOST:PORT [--scenarios a,b,...]
 * [--serialize JSON|ROCKETMQ] [--work-dir DIR] [--messages N] [--timeout-s S]}. Prints one JSON
 * line per check (see {@link Report}); exit status 0 when every check passed, 1 when any
 * failed, 2 on a usage error.
 *
 * <p>Invariant: the client reads its header serialization type (system property
 * {@code rocketmq.serialize.type}, read once in {@code RemotingCommand}'s static initialiser),
 * its log directory and its local offset directory from system properties when those classes
 * initialise, so this class sets them before touching any RocketMQ class; the scenarios live
 * in {@link Scenarios}, loaded only afterwards.
 */
public final class RocketMQRunner {

    public static void main(String[] args) throws Exception {
        String namesrv = null;
        String scenarios = null;
        String serialize = "JSON";
        String workDir = null;
        int messages = 40;
        int timeoutS = 90;
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--namesrv" -> namesrv = args[++i];
                    case "--scenarios" -> scenarios = args[++i];
                    case "--serialize" -> serialize = args[++i].toUpperCase();
                    case "--work-dir" -> workDir = args[++i];
                    case "--messages" -> messages = Integer.parseInt(args[++i]);
                    case "--timeout-s" -> timeoutS = Integer.parseInt(args[++i]);
                    case "--access-key" -> System.setProperty("runner.accessKey", args[++i]);
                    case "--secret-key" -> System.setProperty("runner.secretKey", args[++i]);
                    case "--topic" -> System.setProperty("runner.topic", args[++i]);
                    case "--group" -> System.setProperty("runner.group", args[++i]);
                    case "--list" -> {
                        Scenarios.names().forEach(System.out::println);
                        System.exit(0);
                    }
                    default -> throw new IllegalArgumentException("unknown argument " + args[i]);
                }
            }
            if (namesrv == null) {
                throw new IllegalArgumentException("--namesrv HOST:PORT is required");
            }
            if (!serialize.equals("JSON") && !serialize.equals("ROCKETMQ")) {
                throw new IllegalArgumentException("--serialize must be JSON or ROCKETMQ, got " + serialize);
            }
        } catch (RuntimeException e) {
            System.err.println("rocketmq-runner: " + e.getMessage());
            System.err.println("usage: rocketmq-runner --namesrv HOST:PORT [--scenarios a,b] [--serialize JSON|ROCKETMQ]"
                    + " [--work-dir DIR] [--messages N] [--timeout-s S]; --list names the scenarios");
            System.exit(2);
            return;
        }
        Path work = workDir != null ? Path.of(workDir) : Files.createTempDirectory("rocketmq-runner-");
        Files.createDirectories(work);
        System.setProperty("rocketmq.serialize.type", serialize);
        // client logs and broadcasting offsets go under the work dir, never into ~/logs or ~/.rocketmq_offsets
        System.setProperty("rocketmq.client.logRoot", work.resolve("logs").toString());   // 4.9.x
        System.setProperty("rocketmq.log.root", work.resolve("logs").toString());         // 5.x
        System.setProperty("rocketmq.client.localOffsetStoreDir", work.resolve("offsets").toString());
        System.setProperty("rocketmq.client.logLevel", "INFO");
        System.setProperty("rocketmq.log.level", "INFO");

        List<String> names = scenarios == null ? Scenarios.names() : List.of(scenarios.split(","));
        for (String name : names) {
            if (!Scenarios.names().contains(name)) {
                System.err.println("rocketmq-runner: unknown scenario " + name + "; known: " + Scenarios.names());
                System.exit(2);
            }
        }
        int failed = new Scenarios(namesrv, serialize, messages, timeoutS, builtAgainst(), work).run(names);
        System.exit(failed == 0 ? 0 : 1);
    }

    /** The rocketmq-client version this jar was built against (filtered in by Maven). */
    private static String builtAgainst() {
        try (InputStream in = RocketMQRunner.class.getResourceAsStream("runner.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("rocketmq.client.version", "unknown");
        } catch (Exception e) {
            return "unknown";
        }
    }

    private RocketMQRunner() {
    }

}
