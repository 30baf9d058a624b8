package routepush.agent;

import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.LogRecord;

/** The agent's log lines written while a piece of a test runs. */
final class LogLines {
    private LogLines() {
    }

    static List<LogRecord> capture(Runnable body) {
        final List<LogRecord> records = new ArrayList<LogRecord>();
        Handler capture = new Handler() {
            @Override
            public void publish(LogRecord r) {
                synchronized (records) {
                    records.add(r);
                }
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        Log.LOGGER.addHandler(capture);
        try {
            body.run();
        } finally {
            Log.LOGGER.removeHandler(capture);
        }
        synchronized (records) {
            return new ArrayList<LogRecord>(records);
        }
    }
}
