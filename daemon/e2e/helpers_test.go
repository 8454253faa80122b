package e2e

import (
	"database/sql"
	"fmt"
	"net/http"
	"time"

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
