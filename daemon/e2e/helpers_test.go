package e2e

import (
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

func httpGet(url string) (int, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// bumpSQLiteSchema pretends a newer lifecycled migrated the database.
func bumpSQLiteSchema(path string, version int) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(fmt.Sprintf("UPDATE lifecycled_schema_migrations SET version = %d", version))
	return err
}

// notifyListener plays systemd's notify socket in dir; next waits for a
// message containing want and returns it.
func notifyListener(t *testing.T, dir string) (path string, next func(want string) string) {
	path = filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	msgs := make(chan string, 32)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	return path, func(want string) string {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case m, ok := <-msgs:
				require.True(t, ok)
				if strings.Contains(m, want) {
					return m
				}
			case <-timeout:
				t.Fatalf("no %s notification", want)
			}
		}
	}
}
