package testsvc

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MySQLAdminDSN is the MySQL or MariaDB server tests create databases on, in
// go-sql-driver's form: LIFECYCLED_TEST_MYSQL, or the local server's root
// user without a password (Debian's mariadb-server as `make test-deps`
// starts it).
func MySQLAdminDSN() string {
	if v := os.Getenv("LIFECYCLED_TEST_MYSQL"); v != "" {
		return v
	}
	return "root@tcp(127.0.0.1:3306)/"
}

// MySQLAdmin connects to the admin DSN, closed at cleanup.
func MySQLAdmin(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", MySQLAdminDSN())
	if err != nil {
		t.Fatalf("LIFECYCLED_TEST_MYSQL must be a go-sql-driver DSN (user:password@tcp(host:3306)/): %v", err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("MySQL or MariaDB is needed at %s (set LIFECYCLED_TEST_MYSQL, or run `make test-deps`, which starts mariadb-server): %v", redactMySQL(MySQLAdminDSN()), err)
	}
	return db
}

// MySQLDatabase creates an empty database for this test and drops it
// afterwards. It returns the database's name and a DSN for it with the
// admin's credentials.
func MySQLDatabase(t testing.TB) (name, dsn string) {
	t.Helper()
	admin := MySQLAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name = "lcd_test_" + randomSuffix()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	cfg, err := mysql.ParseDSN(MySQLAdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	return name, cfg.FormatDSN()
}

// MySQLUser creates a user with a password and every privilege on database
// name, dropped at cleanup, and returns its DSN for that database.
func MySQLUser(t testing.TB, name, password string) string {
	t.Helper()
	admin := MySQLAdmin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	user := "lcd_u_" + randomSuffix()
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, password),
		fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", name, user),
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.ExecContext(ctx, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user))
	})
	cfg, err := mysql.ParseDSN(MySQLAdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Passwd, cfg.DBName = user, password, name
	return cfg.FormatDSN()
}

func redactMySQL(dsn string) string {
	if cfg, err := mysql.ParseDSN(dsn); err == nil && cfg.Passwd != "" {
		cfg.Passwd = "***"
		return cfg.FormatDSN()
	}
	return dsn
}
