/* A fixed SQL workload for the SQLite engine (sqlite3.c, the amalgamation
 * shipped in the libsqlite3-sys crate). This driver is ours, written for
 * the andes real-program benchmark suite; all the work it measures is
 * SQLite's: parsing, planning, the B-tree, the pager and its file I/O.
 *
 *   workload DBFILE [SCALE]
 *
 * creates DBFILE (removing any old one) in the current directory, fills
 * three tables from a seeded generator, builds indexes, runs joins,
 * aggregates, window functions, updates and deletes, and prints every
 * result. The output depends only on SCALE. */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include "sqlite3.h"

static sqlite3 *db;
static uint64_t rng = 0x2545F4914F6CDD1DULL;

static uint64_t next(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ULL;
}
static int below(int n) { return (int)((next() >> 33) % (uint64_t)n); }

static void die(const char *what) {
  fprintf(stderr, "workload: %s: %s\n", what, sqlite3_errmsg(db));
  exit(1);
}

static void exec(const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "workload: %s\n  in: %s\n", err ? err : "?", sql);
    exit(1);
  }
}

/* Run a query and print each row, columns separated by '|'. */
static void query(const char *title, const char *sql) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die(sql);
  printf("-- %s\n", title);
  int rc, rows = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int n = sqlite3_column_count(st);
    for (int i = 0; i < n; i++) {
      const unsigned char *v = sqlite3_column_text(st, i);
      printf("%s%s", i ? "|" : "", v ? (const char *)v : "NULL");
    }
    putchar('\n');
    rows++;
  }
  if (rc != SQLITE_DONE) die(sql);
  sqlite3_finalize(st);
  printf("(%d rows)\n", rows);
}

static const char *syllables[] = {"ka", "lo", "mi", "ne", "su", "ta", "ri",
                                  "vo", "de", "an", "el", "or", "is", "um"};

static void name(char *buf, int parts) {
  buf[0] = '\0';
  for (int i = 0; i < parts; i++) strcat(buf, syllables[below(14)]);
  buf[0] -= 32;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: workload DBFILE [SCALE]\n");
    return 2;
  }
  const char *path = argv[1];
  int scale = argc > 2 ? atoi(argv[2]) : 10;
  remove(path);
  if (sqlite3_open(path, &db) != SQLITE_OK) die("open");
  printf("sqlite %s, scale %d\n", sqlite3_libversion(), scale);
  exec("PRAGMA page_size=4096; PRAGMA cache_size=-8192;"
       "PRAGMA journal_mode=DELETE; PRAGMA synchronous=OFF;");
  exec("CREATE TABLE region(id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
       "CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
       "  region INTEGER NOT NULL REFERENCES region(id), joined INTEGER);"
       "CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER NOT NULL,"
       "  day INTEGER NOT NULL, cents INTEGER NOT NULL, status TEXT, note TEXT);");

  int nregion = 20, ncust = 2000 * scale, norders = 20000 * scale;
  char buf[256], note[256];
  sqlite3_stmt *st;

  exec("BEGIN");
  if (sqlite3_prepare_v2(db, "INSERT INTO region VALUES(?1, ?2)", -1, &st, NULL)) die("prep");
  for (int i = 1; i <= nregion; i++) {
    name(buf, 3);
    sqlite3_bind_int(st, 1, i);
    sqlite3_bind_text(st, 2, buf, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) != SQLITE_DONE) die("insert region");
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  if (sqlite3_prepare_v2(db, "INSERT INTO customer VALUES(?1, ?2, ?3, ?4)", -1, &st, NULL)) die("prep");
  for (int i = 1; i <= ncust; i++) {
    name(buf, 2 + below(3));
    strcat(buf, " ");
    size_t l = strlen(buf);
    name(buf + l, 3);
    sqlite3_bind_int(st, 1, i);
    sqlite3_bind_text(st, 2, buf, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 3, 1 + below(nregion));
    sqlite3_bind_int(st, 4, below(3650));
    if (sqlite3_step(st) != SQLITE_DONE) die("insert customer");
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  exec("COMMIT");

  static const char *status[] = {"open", "shipped", "delivered", "returned", "lost"};
  /* Orders in batches of 10000 per transaction. */
  if (sqlite3_prepare_v2(db, "INSERT INTO orders VALUES(NULL, ?1, ?2, ?3, ?4, ?5)", -1, &st, NULL)) die("prep");
  for (int i = 0; i < norders; i++) {
    if (i % 10000 == 0) exec("BEGIN");
    int words = below(8);
    note[0] = '\0';
    for (int w = 0; w < words; w++) {
      name(buf, 1 + below(3));
      if (w) strcat(note, " ");
      strcat(note, buf);
    }
    sqlite3_bind_int(st, 1, 1 + below(ncust));
    sqlite3_bind_int(st, 2, below(3650));
    sqlite3_bind_int(st, 3, 100 + below(100000));
    sqlite3_bind_text(st, 4, status[below(100) < 70 ? 2 : below(5)], -1, SQLITE_STATIC);
    if (words) sqlite3_bind_text(st, 5, note, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, 5);
    if (sqlite3_step(st) != SQLITE_DONE) die("insert order");
    sqlite3_reset(st);
    if (i % 10000 == 9999 || i == norders - 1) exec("COMMIT");
  }
  sqlite3_finalize(st);

  query("counts", "SELECT (SELECT count(*) FROM region), (SELECT count(*) FROM customer),"
                  " (SELECT count(*) FROM orders)");
  /* A join and aggregate before any index: scans and automatic indexes. */
  query("revenue by region (no index)",
        "SELECT r.name, count(*), sum(o.cents) FROM orders o"
        " JOIN customer c ON c.id = o.customer JOIN region r ON r.id = c.region"
        " WHERE o.status = 'delivered' GROUP BY r.id ORDER BY sum(o.cents) DESC");

  exec("CREATE INDEX orders_customer ON orders(customer, day);"
       "CREATE INDEX orders_day ON orders(day);"
       "CREATE INDEX customer_region ON customer(region, name);"
       "ANALYZE;");

  query("top customers",
        "SELECT c.name, count(o.id), sum(o.cents) AS total FROM customer c"
        " JOIN orders o ON o.customer = c.id GROUP BY c.id"
        " ORDER BY total DESC, c.id LIMIT 15");
  query("monthly revenue, running total",
        "SELECT day / 30 AS month, sum(cents),"
        " sum(sum(cents)) OVER (ORDER BY day / 30) FROM orders"
        " GROUP BY month ORDER BY month LIMIT 40");
  query("rank within region",
        "SELECT region, name, total FROM (SELECT c.region, c.name, sum(o.cents) AS total,"
        " rank() OVER (PARTITION BY c.region ORDER BY sum(o.cents) DESC, c.id) AS rk"
        " FROM customer c JOIN orders o ON o.customer = c.id GROUP BY c.id)"
        " WHERE rk <= 2 ORDER BY region, rk");
  query("notes matching a pattern",
        "SELECT count(*), sum(length(note)) FROM orders WHERE note LIKE '%kalo%'");
  query("customers without orders in a range",
        "SELECT count(*) FROM customer c WHERE NOT EXISTS"
        " (SELECT 1 FROM orders o WHERE o.customer = c.id AND o.day BETWEEN 1000 AND 1400)");
  query("status mix per decade of days",
        "SELECT day / 365, status, count(*), avg(cents) FROM orders"
        " GROUP BY 1, 2 ORDER BY 1, 2");

  exec("BEGIN;"
       "UPDATE orders SET cents = cents * 105 / 100 WHERE status = 'open';"
       "UPDATE customer SET name = upper(name) WHERE region % 3 = 0;"
       "DELETE FROM orders WHERE status = 'lost' AND day < 1800;"
       "COMMIT;");
  query("after update and delete",
        "SELECT status, count(*), sum(cents), min(day), max(day) FROM orders"
        " GROUP BY status ORDER BY status");
  query("distinct name prefixes",
        "SELECT substr(name, 1, 2) AS p, count(*) FROM customer GROUP BY p"
        " ORDER BY count(*) DESC, p LIMIT 10");
  query("recursive CTE over customers",
        "WITH RECURSIVE chain(id, depth) AS (SELECT 1, 0 UNION ALL"
        " SELECT (id * 7919) % " "(SELECT count(*) FROM customer) + 1, depth + 1 FROM chain"
        " WHERE depth < 50000) SELECT count(*), sum(c.joined) FROM chain JOIN customer c ON c.id = chain.id");
  exec("CREATE TABLE summary AS SELECT customer, count(*) AS n, sum(cents) AS total"
       " FROM orders GROUP BY customer; VACUUM;");
  query("summary check", "SELECT count(*), sum(n), sum(total) FROM summary");
  query("integrity", "PRAGMA integrity_check");

  if (sqlite3_close(db) != SQLITE_OK) die("close");
  return 0;
}
