// A JDBC program as a BI tool would be: lists tables and columns through DatabaseMetaData, then
// runs the statements of a file (one per line-ending ';'), printing each result set as
// tab-separated lines. Run with the Java that Spark needs, source-launched:
//   java -cp /usr/share/java/postgresql.jar JdbcClient.java URL USER SCHEMA FILE
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;

public class JdbcClient {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.setProperty("user", args[1]);
        try (Connection conn = DriverManager.getConnection(args[0], props)) {
            DatabaseMetaData meta = conn.getMetaData();
            System.out.println("#product\t" + meta.getDatabaseProductName() + "\t" + meta.getDatabaseProductVersion());
            try (ResultSet tables = meta.getTables(null, args[2], "%", new String[] {"TABLE"})) {
                while (tables.next()) {
                    String table = tables.getString("TABLE_NAME");
                    System.out.println("#table\t" + tables.getString("TABLE_SCHEM") + "\t" + table);
                    try (ResultSet cols = meta.getColumns(null, args[2], table, "%")) {
                        while (cols.next()) {
                            System.out.println("#column\t" + table + "\t" + cols.getString("COLUMN_NAME") + "\t"
                                + cols.getString("TYPE_NAME") + "\t" + cols.getInt("DATA_TYPE"));
                        }
                    }
                }
            }
            String script = Files.readString(Path.of(args[3]));
            for (String sql : script.split(";\\s*\\n")) {
                if (sql.isBlank()) continue;
                try (Statement st = conn.createStatement()) {
                    boolean rows = st.execute(sql);
                    System.out.println("#ok\t" + sql.strip().split("\\s+")[0]);
                    if (rows) {
                        try (ResultSet rs = st.getResultSet()) {
                            ResultSetMetaData md = rs.getMetaData();
                            while (rs.next()) {
                                StringBuilder line = new StringBuilder("#row");
                                for (int i = 1; i <= md.getColumnCount(); i++) {
                                    line.append('\t').append(rs.getString(i));
                                }
                                System.out.println(line);
                            }
                        }
                    }
                } catch (SQLException e) {
                    System.out.println("#error\t" + e.getSQLState() + "\t" + e.getMessage().replace('\n', ' '));
                    System.exit(2);
                }
            }
        }
    }
}
