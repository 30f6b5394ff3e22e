package rockafka.connect;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * Copies a text file's complete lines into a topic, one record per line, and resumes from the byte
 * position stored in the worker's offset topic: the same contract as Apache Kafka's
 * FileStreamSourceConnector, whose connect-file jar is not published for 4.4 (its 4.3 build calls
 * a kafka-clients class that 4.4 moved). Source partition {"filename": path}, offset {"position": n}.
 */
public class LineFileSourceConnector extends SourceConnector {
    static final String VERSION = "1";
    static final ConfigDef CONFIG = new ConfigDef()
        .define("file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the file to copy")
        .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the topic to copy it to");

    private Map<String, String> props;

    @Override public String version() { return VERSION; }
    @Override public void start(Map<String, String> props) { CONFIG.parse(props); this.props = props; }
    @Override public Class<? extends Task> taskClass() { return LineTask.class; }
    @Override public List<Map<String, String>> taskConfigs(int maxTasks) { return List.of(props); }
    @Override public void stop() { }
    @Override public ConfigDef config() { return CONFIG; }

    public static class LineTask extends SourceTask {
        private String file;
        private String topic;
        private long position;
        private Map<String, String> partition;

        @Override public String version() { return VERSION; }

        @Override public void start(Map<String, String> props) {
            file = props.get("file");
            topic = props.get("topic");
            partition = Collections.singletonMap("filename", file);
            Map<String, Object> stored = context.offsetStorageReader().offset(partition);
            position = stored == null ? 0L : ((Number) stored.get("position")).longValue();
        }

        @Override public List<SourceRecord> poll() throws InterruptedException {
            List<SourceRecord> out = new ArrayList<>();
            try (RandomAccessFile in = new RandomAccessFile(file, "r")) {
                if (in.length() > position) {
                    byte[] buf = new byte[(int) Math.min(in.length() - position, 1 << 20)];
                    in.seek(position);
                    in.readFully(buf);
                    int start = 0;
                    for (int i = 0; i < buf.length; i++) {
                        if (buf[i] != '\n') continue;
                        String line = new String(buf, start, i - start, StandardCharsets.UTF_8);
                        start = i + 1;
                        out.add(new SourceRecord(partition, Collections.singletonMap("position", position + start),
                                                 topic, null, null, null, Schema.STRING_SCHEMA, line));
                    }
                    position += start;  // a line without its newline yet waits for the next poll
                }
            } catch (IOException e) {
                throw new ConnectException("reading " + file, e);
            }
            if (out.isEmpty()) {
                Thread.sleep(200);
                return null;
            }
            return out;
        }

        @Override public void stop() { }
    }
}
