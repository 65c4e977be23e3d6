// Batch sends Statement batches through MariaDB Connector/J (Debian's
// libmariadb-java) with useBatchMultiSend=true, the driver's default: the
// batch's statements go out without waiting for answers, a pipeline on one
// connection. It prints one JSON line per batch, timed around
// executeBatch.
//
//	java -cp mariadb-java-client.jar Batch.java HOST PORT USER N SQL BATCHES PAUSE_MS
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Instant;

public class Batch {
    static long nowUS() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000L + t.getNano() / 1_000;
    }

    public static void main(String[] a) throws Exception {
        String url = "jdbc:mariadb://" + a[0] + ":" + a[1] + "/?user=" + a[2] + "&useBatchMultiSend=true";
        int n = Integer.parseInt(a[3]);
        String sql = a[4];
        int batches = Integer.parseInt(a[5]);
        long pause = Long.parseLong(a[6]);
        try (Connection c = DriverManager.getConnection(url)) {
            long id;
            try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT CONNECTION_ID()")) {
                rs.next();
                id = rs.getLong(1);
            }
            for (int b = 0; b < batches; b++) {
                Thread.sleep(pause);
                try (Statement s = c.createStatement()) {
                    for (int i = 0; i < n; i++) {
                        s.addBatch(sql);
                    }
                    long start = nowUS();
                    int[] counts = s.executeBatch();
                    long end = nowUS();
                    System.out.printf("{\"client\":\"connector/j\",\"conn_id\":%d,\"batch\":%d,\"n\":%d,\"start_us\":%d,\"end_us\":%d}%n",
                            id, b, counts.length, start, end);
                }
            }
        }
    }
}
