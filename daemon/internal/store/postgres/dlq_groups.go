package postgres

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

// pgSeeGroup records a group seen at $5 (upsert: the first and
// last sightings widen): (id, pattern, exception class, sample error, at,
// error group).
const pgSeeGroup = `
		INSERT INTO dlq.dlq_failure_groups AS g (id, pattern, exception_class, sample_error, first_seen, last_seen, error_group)
		VALUES ($1, $2, $3, $4, $5, $5, $6)
		ON CONFLICT (id) DO UPDATE SET first_seen = LEAST(g.first_seen, EXCLUDED.first_seen),
			last_seen = GREATEST(g.last_seen, EXCLUDED.last_seen)`

var pgGroups = sqlstore.GroupsSQL{See: pgSeeGroup,
	// One microsecond later: PostgreSQL's updated_at trigger stamps
	// now() on an UPDATE that leaves updated_at equal, which would
	// postpone the message's archiving by a whole retention period.
	Regroup: `UPDATE dlq.dlq_messages SET failure_group = $2, updated_at = updated_at + interval '1 microsecond'
			WHERE id = $1 AND failure_group = ''`,
	SetErrorGroup: `UPDATE dlq.dlq_failure_groups SET error_group = $2 WHERE id = $1`,
	HourBucket:    `floor(extract(epoch FROM (%[1]s - %[2]s::timestamptz)) / 3600)::int`}
