package postgres

import (
	"strings"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

// pgListPage is a page of a topic, newest first (the seed's list route):
// one ordered walk per topic column and status, of the search's
// (dlq_topic|original_topic, status, created_at, id) indexes, merged. The
// seed's (topic, created_at, id) indexes, which served it as two walks,
// are gone (migration 016): they cost intake more than the six extra
// index probes of a list page cost it. A status asked for leaves one
// branch per column; the others end at their one-time filter.
var pgListPage = func() string {
	var parts []string
	for _, col := range []string{"dlq_topic = $1", "original_topic = $1 AND dlq_topic <> $1"} {
		for _, st := range dlq.Statuses {
			parts = append(parts, `(SELECT `+sqlstore.DLQColumns+` FROM dlq.dlq_messages WHERE `+col+` AND status = '`+string(st)+`'
				AND ($5 = '' OR $5 = '`+string(st)+`') ORDER BY created_at DESC, id DESC LIMIT $4)`)
		}
	}
	return `SELECT ` + sqlstore.DLQColumns + ` FROM (` + strings.Join(parts, " UNION ALL ") + `) t
		ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`
}()
