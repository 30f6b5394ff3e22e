package rockafka.compat.kafka;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Machine-readable results: one JSON object per line on stdout, one line per check.
 *
 * <p>Line shapes (the pytest drivers parse these):
 * <pre>
 *   {"type":"check","scenario":S,"check":C,"ok":true|false,"detail":D}
 *   {"type":"summary","checks":N,"failed":F,"scenarios":[...]}
 * </pre>
 * A scenario that throws gets one failing check named "completed" carrying the exception
 * class, message and the top of its stack trace, so a failure names what broke. Nothing else
 * is printed to stdout (client logging goes to stderr).
 */
final class Report {
    private int checks;
    private int failed;
    private String scenario = "";

    void begin(String scenarioName) {
        scenario = scenarioName;
    }

    /** Records one check and returns its outcome so callers may stop early. */
    boolean check(String name, boolean ok, Object detail) {
        checks++;
        if (!ok) {
            failed++;
        }
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("type", "check");
        line.put("scenario", scenario);
        line.put("check", name);
        line.put("ok", ok);
        line.put("detail", detail == null ? "" : String.valueOf(detail));
        emit(line);
        return ok;
    }

    /** Equality check with the expected and actual values in the detail. */
    boolean equal(String name, Object expected, Object actual) {
        boolean ok = expected == null ? actual == null : expected.equals(actual);
        return check(name, ok, "expected=" + expected + " actual=" + actual);
    }

    /** An {@code info} line: a key and value the caller may read (not a check). */
    void info(String key, String value) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("type", "info");
        line.put("key", key);
        line.put("value", value);
        emit(line);
    }

    void error(Throwable t) {
        StringWriter sw = new StringWriter();
        t.printStackTrace(new PrintWriter(sw));
        String trace = sw.toString();
        if (trace.length() > 6000) {
            trace = trace.substring(0, 6000) + "...";
        }
        check("completed", false, t.getClass().getName() + ": " + t.getMessage() + "\n" + trace);
    }

    int failed() {
        return failed;
    }

    void summary(Iterable<String> scenarios) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("type", "summary");
        line.put("checks", checks);
        line.put("failed", failed);
        StringBuilder names = new StringBuilder("[");
        for (String s : scenarios) {
            if (names.length() > 1) {
                names.append(',');
            }
            names.append(quote(s));
        }
        line.put("scenarios", new Raw(names.append(']').toString()));
        emit(line);
    }

    private record Raw(String json) {}

    private static synchronized void emit(Map<String, Object> fields) {
        StringBuilder sb = new StringBuilder("{");
        for (Map.Entry<String, Object> e : fields.entrySet()) {
            if (sb.length() > 1) {
                sb.append(',');
            }
            sb.append(quote(e.getKey())).append(':');
            Object v = e.getValue();
            if (v instanceof Raw raw) {
                sb.append(raw.json());
            } else if (v instanceof Boolean || v instanceof Number) {
                sb.append(v);
            } else {
                sb.append(quote(String.valueOf(v)));
            }
        }
        System.out.println(sb.append('}'));
        System.out.flush();
    }

    static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
            }
        }
        return sb.append('"').toString();
    }
}
