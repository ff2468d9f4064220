import java.sql.*;
import java.util.Properties;

/** What a JDBC tool (DBeaver-like browser) asks of DatabaseMetaData. */
public class JdbcMeta {
    static void label(Connection c, String action) throws SQLException {
        try (Statement s = c.createStatement()) { s.execute("SET application_name = 'h1/jdbc/" + action + "'"); }
    }
    static void dump(String title, ResultSet rs) throws SQLException {
        ResultSetMetaData md = rs.getMetaData();
        StringBuilder sb = new StringBuilder(title + ":");
        int n = 0;
        while (rs.next()) {
            n++;
            sb.append("\n  ");
            for (int i = 1; i <= md.getColumnCount(); i++) {
                sb.append(md.getColumnLabel(i)).append('=').append(rs.getString(i)).append(i < md.getColumnCount() ? ", " : "");
            }
        }
        rs.close();
        System.out.println(sb + "\n  (" + n + " rows)");
    }
    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/pitstop";
        Properties p = new Properties();
        p.setProperty("user", "pitstop");
        p.setProperty("ApplicationName", "h1/jdbc/connect");
        try (Connection c = DriverManager.getConnection(url, p)) {
            DatabaseMetaData md = c.getMetaData();
            System.out.println("product=" + md.getDatabaseProductName() + " " + md.getDatabaseProductVersion());
            label(c, "getSchemas");
            dump("getSchemas", md.getSchemas());
            label(c, "getCatalogs");
            dump("getCatalogs", md.getCatalogs());
            label(c, "getTableTypes");
            dump("getTableTypes", md.getTableTypes());
            label(c, "getTables");
            dump("getTables", md.getTables(null, "public", "%", new String[]{"TABLE", "VIEW"}));
            label(c, "getTables-all");
            dump("getTables-all", md.getTables(null, null, "%", null));
            label(c, "getColumns");
            dump("getColumns", md.getColumns(null, "public", "daily_revenue", "%"));
            label(c, "getPrimaryKeys");
            dump("getPrimaryKeys", md.getPrimaryKeys(null, "public", "daily_revenue"));
            label(c, "getPrimaryKeys-jobs");
            dump("getPrimaryKeys-jobs", md.getPrimaryKeys(null, "pitstop", "jobs"));
            label(c, "getImportedKeys");
            dump("getImportedKeys", md.getImportedKeys(null, "public", "daily_revenue"));
            label(c, "getIndexInfo");
            dump("getIndexInfo", md.getIndexInfo(null, "public", "daily_revenue", false, true));
            label(c, "query");
            try (PreparedStatement ps = c.prepareStatement("SELECT region, revenue, orders, window_start FROM daily_revenue WHERE orders > ? ORDER BY region")) {
                ps.setInt(1, 1);
                ResultSet rs = ps.executeQuery();
                ResultSetMetaData rmd = rs.getMetaData();
                StringBuilder sb = new StringBuilder("query-metadata:");
                for (int i = 1; i <= rmd.getColumnCount(); i++) {
                    sb.append(' ').append(rmd.getColumnName(i)).append(':').append(rmd.getColumnTypeName(i))
                      .append('(').append(rmd.getPrecision(i)).append(',').append(rmd.getScale(i)).append(')')
                      .append(" table=").append(rmd.getTableName(i)).append(" nullable=").append(rmd.isNullable(i));
                }
                System.out.println(sb);
                dump("query", rs);
            }
        }
    }
}
