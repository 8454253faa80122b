package testsvc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgImagePrefix names the template databases of NewPGImage:
// lcd_image_<host>_<pid>_<random>.
const pgImagePrefix = "lcd_image_"

// NewPGImage creates a database for PGDatabaseFrom to copy, fills it with
// fill (given its DSN; it must close every connection it opened) and
// returns its name. It lives as long as the test process: the throwaway
// server of scripts/test-pg.sh goes with it, and on a server of one's own
// (LIFECYCLED_TEST_PG) the next NewPGImage on this host drops the images
// of processes that have ended.
func NewPGImage(ctx context.Context, fill func(dsn string) error) (string, error) {
	conn, err := pgx.Connect(ctx, PGAdminDSN())
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", redact(PGAdminDSN()), err)
	}
	defer conn.Close(ctx)
	host := hostTag()
	dropEndedImages(ctx, conn, host)
	name := fmt.Sprintf("%s%s_%d_%s", pgImagePrefix, host, os.Getpid(), randomSuffix()[:4])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	dsn, err := PGDSN(name)
	if err != nil {
		return "", err
	}
	if err := fill(dsn); err != nil {
		return "", err
	}
	// A copy needs the template without connections: the server may
	// still be ending the ones fill closed. The image is this process's
	// alone, so a session still on it after a while is one of ours that
	// lingers (CI once saw one stay two minutes on a loaded machine): it is
	// ended.
	for start := time.Now(); ; {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", name).Scan(&n); err != nil {
			return "", err
		}
		if n == 0 {
			return name, nil
		}
		if time.Since(start) > 5*time.Second {
			if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name); err != nil {
				return "", fmt.Errorf("end the sessions left on image %s: %w", name, err)
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("image %s still has %d connections: %w", name, n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// hostTag tells this host's images apart from another's on a shared
// server: the process ids in their names are this host's.
func hostTag() string {
	h, _ := os.Hostname()
	sum := sha256.Sum256([]byte(h))
	return hex.EncodeToString(sum[:4])
}

// dropEndedImages drops the images this host's ended test processes left.
func dropEndedImages(ctx context.Context, conn *pgx.Conn, host string) {
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", pgImagePrefix+host+"_")
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, name := range names {
		parts := strings.Split(strings.TrimPrefix(name, pgImagePrefix+host+"_"), "_")
		pid, err := strconv.Atoi(parts[0])
		if err != nil || processAlive(pid) {
			continue
		}
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				return
			}
		}
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
