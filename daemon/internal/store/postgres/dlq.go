package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
	"github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"
)

var pgDLQ = sqlstore.DLQSQL{
	Get:    `SELECT ` + sqlstore.DLQColumns + ` FROM dlq.dlq_messages WHERE id = $1`,
	Delete: `DELETE FROM dlq.dlq_messages WHERE id = $1`,
	Topics: `
		SELECT c.dlq_topic, c.status, c.n,
			(SELECT min(m.created_at) FROM dlq.dlq_messages m WHERE m.dlq_topic = c.dlq_topic AND m.status = 'PENDING')
		FROM (SELECT dlq_topic, status, sum(n)::bigint AS n FROM dlq.dlq_topic_counts GROUP BY 1, 2 HAVING sum(n) > 0) c
		ORDER BY c.dlq_topic`,
	ListPage: pgListPage,
	ListCount: `
		SELECT COALESCE(sum(n), 0)::bigint FROM dlq.dlq_topic_counts
		WHERE (dlq_topic = $1 OR (original_topic = $1 AND dlq_topic <> $1)) AND ($2 = '' OR status = $2)`,
	Known: `
		SELECT EXISTS (SELECT 1 FROM dlq.dlq_messages WHERE source = $1 AND dlq_topic = $2 AND source_position = $3
				AND ` + pgSameContent + `)
			OR EXISTS (SELECT 1 FROM dlq.dlq_messages_archive WHERE source = $1 AND dlq_topic = $2 AND source_position = $3
				AND ` + pgSameContent + `)
			OR EXISTS (SELECT 1 FROM dlq.dlq_returns WHERE source = $1 AND dlq_topic = $2 AND source_position = $3
				AND ` + pgSameContent + `)`,
	RecordReturn: `
		INSERT INTO dlq.dlq_returns (` + sqlstore.ReturnColumns + `) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT DO NOTHING`,
	Returned: `
		UPDATE dlq.dlq_messages SET status = $2::text, retry_count = $3, error_message = $4, next_retry_at = $5,
			lease_owner = CASE WHEN $2::text = 'RETRYING' THEN lease_owner END,
			lease_expires_at = CASE WHEN $2::text = 'RETRYING' THEN lease_expires_at END,
			updated_at = $6, last_error = $7, attempt_log = ` + pgAppendAttempt("$8") + `
		WHERE id = $1`,
	// A loose index scan of the due index: one probe per source.
	PendingSources: `
		WITH RECURSIVE s(source) AS (
			SELECT min(source) FROM dlq.dlq_messages WHERE status = 'PENDING'
			UNION ALL
			SELECT (SELECT min(m.source) FROM dlq.dlq_messages m WHERE m.status = 'PENDING' AND m.source > s.source)
			FROM s WHERE s.source IS NOT NULL
		)
		SELECT source FROM s WHERE source IS NOT NULL`,
	PendingOfSource: `
		SELECT dlq_topic, count(*) FROM dlq.dlq_messages WHERE status = 'PENDING' AND source = $1
		GROUP BY dlq_topic ORDER BY dlq_topic`,
	List: func(l []string) any {
		if l == nil {
			return []string{}
		}
		return l
	},
	ClaimSQL: sqlstore.ClaimSQL{
		Claim: `
			UPDATE dlq.dlq_messages SET status = 'RETRYING', last_retry_at = $2, lease_owner = $3,
				lease_expires_at = ` + pgLeaseEnd("$4", "$5") + `, updated_at = $2
			WHERE id = $1 AND ` + sqlstore.Retryable + ` AND (status = 'PENDING' OR (lease_expires_at < $2 AND lease_owner IS DISTINCT FROM $3))
			RETURNING ` + sqlstore.DLQColumns,
		ClaimTopic: `
			WITH cand AS (
				(SELECT id FROM dlq.dlq_messages WHERE dlq_topic = $1 AND status = 'PENDING'
					AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $4)
				UNION ALL
				(SELECT id FROM dlq.dlq_messages WHERE original_topic = $1 AND dlq_topic <> $1 AND status = 'PENDING'
					AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $4)
			), pick AS (
				SELECT id AS pick_id FROM dlq.dlq_messages m JOIN cand USING (id)
				WHERE status = 'PENDING' AND ` + sqlstore.Retryable + `
				ORDER BY created_at, id LIMIT $4
				FOR UPDATE OF m SKIP LOCKED
			)
			UPDATE dlq.dlq_messages SET status = 'RETRYING', last_retry_at = $5, lease_owner = $6,
				lease_expires_at = ` + pgLeaseEnd("$7", "$8") + `, updated_at = $5
			FROM pick WHERE id = pick_id
			RETURNING ` + sqlstore.DLQColumns,
		CountRetryable: `
			SELECT (SELECT count(*) FROM dlq.dlq_messages WHERE dlq_topic = $1 AND status = 'PENDING' AND ` + sqlstore.Retryable + `)
				+ (SELECT count(*) FROM dlq.dlq_messages WHERE original_topic = $1 AND dlq_topic <> $1
					AND status = 'PENDING' AND ` + sqlstore.Retryable + `)`,
		ClaimDue: `
			WITH due AS (
				SELECT id AS due_id FROM dlq.dlq_messages
				WHERE status = 'PENDING' AND source = ANY($5) AND next_retry_at <= $1 AND ` + sqlstore.Retryable + `
					AND dlq_topic <> ALL($6) AND NOT EXISTS (SELECT 1 FROM dlq.dlq_topic_pauses p WHERE p.dlq_topic = dlq_messages.dlq_topic AND p.resumed_at IS NULL)
				ORDER BY next_retry_at LIMIT $2 FOR UPDATE SKIP LOCKED
			)
			UPDATE dlq.dlq_messages SET status = 'RETRYING', last_retry_at = $1, lease_owner = $3,
				lease_expires_at = ` + pgLeaseEnd("$4", "$7") + `, updated_at = $1
			FROM due WHERE id = due_id
			RETURNING ` + sqlstore.DLQColumns,
		ReleaseExpired: `
			UPDATE dlq.dlq_messages SET status = ` + sqlstore.Released + `, lease_owner = NULL, lease_expires_at = NULL,
				next_retry_at = CASE WHEN retry_count < max_retries THEN $1::timestamptz END, updated_at = $1
			WHERE status = 'RETRYING' AND lease_expires_at < $1 AND NOT (lease_owner IS NOT DISTINCT FROM $2 AND id = ANY($3::uuid[]))`,
		Renew: `
			UPDATE dlq.dlq_messages SET lease_expires_at = ` + pgLeaseEnd("$4", "$5") + `
			WHERE id = ANY($1::uuid[]) AND status = 'RETRYING' AND lease_owner = $2 AND last_retry_at = $3`,
		Revive: `
			UPDATE dlq.dlq_messages SET status = $6, retry_count = $7, max_retries = $2, next_retry_at = $3,
				lease_owner = NULL, lease_expires_at = NULL, updated_at = $4, attempt_log = ` + pgAppendAttempt("$5") + `
			WHERE id = $1 AND status = $8 AND NOT truncated AND original_topic <> ''
			RETURNING ` + sqlstore.DLQColumns,
		ClaimedRead: `SELECT ` + sqlstore.ClaimedColumns + ` FROM dlq.dlq_messages WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`,
	},
	Unacked: sqlstore.UnackedSQL{
		// SKIP LOCKED: a concurrent intake taking one of two identical
		// deliveries leaves the other to this one.
		Take: `
			DELETE FROM dlq.dlq_unacked WHERE (source, dlq_topic, source_position) = (
				SELECT source, dlq_topic, source_position FROM dlq.dlq_unacked
				WHERE source = $1 AND dlq_topic = $2 AND content_digest = $3 AND stored_at >= $4 AND NOT committing
				ORDER BY stored_at, source_position LIMIT 1 FOR UPDATE SKIP LOCKED)
			RETURNING message_id`,
		Keep: `
			INSERT INTO dlq.dlq_unacked (source, dlq_topic, source_position, content_digest, message_id, stored_at)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
		KeepStored: `
			INSERT INTO dlq.dlq_unacked (source, dlq_topic, source_position, content_digest, message_id, stored_at)
			SELECT m.source, m.dlq_topic, m.source_position, m.content_digest, m.id, $5
			FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bytea[]) AS u(s, t, p, d)
			JOIN dlq.dlq_messages m ON m.source = u.s AND m.dlq_topic = u.t AND m.source_position = u.p AND m.content_digest = u.d
			ON CONFLICT DO NOTHING`,
		// The digests ($4) are not needed to name a delivery.
		Confirm: `
			DELETE FROM dlq.dlq_unacked u USING unnest($1::text[], $2::text[], $3::bytea[]) AS j(s, t, p)
			WHERE u.source = j.s AND u.dlq_topic = j.t AND u.source_position = j.p AND cardinality($4::bytea[]) >= 0`,
		Mark: `
			UPDATE dlq.dlq_unacked u SET committing = $5 FROM unnest($1::text[], $2::text[], $3::bytea[]) AS j(s, t, p)
			WHERE u.source = j.s AND u.dlq_topic = j.t AND u.source_position = j.p AND cardinality($4::bytea[]) >= 0`,
		Arrays: true,
		Expire: `DELETE FROM dlq.dlq_unacked WHERE stored_at < $1`,
	},
}

// pgAppendAttempt is the SQL that appends the JSON history entry in param
// to attempt_log, keeping the newest dlq.MaxAttempts.
func pgAppendAttempt(param string) string {
	return fmt.Sprintf("(CASE WHEN jsonb_array_length(attempt_log) >= %d THEN attempt_log - 0 ELSE attempt_log END)"+
		" || jsonb_build_array(%s::jsonb)", dlq.MaxAttempts, param)
}

// pgSameContent matches the rows of a position whose digest is $4, or
// unknown on either side (an empty digest).
const pgSameContent = `(content_digest = $4 OR content_digest = '\x'::bytea OR $4 = '\x'::bytea)`

// pgSafeJSON reports whether PostgreSQL's jsonb accepts payload: it rejects
// \u0000 and unpaired surrogates that encoding/json lets through. Such a
// payload is still stored byte for byte in raw_payload.
func pgSafeJSON(b []byte) bool {
	if !json.Valid(b) {
		return false
	}
	s := string(b)
	for i := strings.Index(s, `\u`); i >= 0; i = strings.Index(s, `\u`) {
		if len(s) >= i+6 {
			code := strings.ToLower(s[i+2 : i+6])
			if code == "0000" || (code[0] == 'd' && code[1] >= '8') {
				return false
			}
		}
		s = s[i+2:]
	}
	return true
}

// pgIngest inserts what is new of a batch given as arrays, and adds it to
// the per-topic counts, in one statement (one round trip). A position
// already stored with the same digest, live or archived, or stored before
// digests (an empty one, found in a partial index that only such rows are
// in), is a redelivery:
// an archived position stays known, so a consumer group that reads it
// again does not make it a new dead letter; the same position with another
// digest is a new dead letter (its topic was deleted and created again).
// The new ids are queued for the search indexer (dlq_search_index.go), and
// counted in the arrivals of their hour ($31, created_at's UTC hour).
const pgIngest = `
	WITH ins AS (
		INSERT INTO dlq.dlq_messages (` + sqlstore.DLQInsertColumns + `)
		SELECT u.id, u.ot, u.em, 0, $13, u.pl::jsonb, u.st, $14, $14, u.src, u.dt, u.pos, u.disp, u.k,
			u.h, u.raw, u.prod, u.nx, u.le, u.al::jsonb, u.dg, u.fg, u.tr, u.ec, u.fa, u.ff, u.of, u.oc
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], $6::text[], $7::text[],
			$8::bytea[], $9::text[], $10::bytea[], $11::bytea[], $12::timestamptz[], $15::text[],
			$16::timestamptz[], $17::text[], $18::text[], $19::bytea[], $20::text[], $24::bool[],
			$25::text[], $26::int[], $27::timestamptz[], $28::text[], $29::bool[])
			AS u(id, ot, em, pl, raw, src, dt, pos, disp, k, h, prod, st, nx, le, al, dg, fg, tr, ec, fa, ff, of, oc)
		WHERE NOT EXISTS (SELECT 1 FROM dlq.dlq_messages_archive a WHERE a.source = u.src
				AND a.dlq_topic = u.dt AND a.source_position = u.pos
				AND (a.content_digest = u.dg OR a.content_digest = '\x'::bytea))
			AND NOT EXISTS (SELECT 1 FROM dlq.dlq_messages m WHERE m.source = u.src
				AND m.dlq_topic = u.dt AND m.source_position = u.pos
				AND m.content_digest = '\x'::bytea)
		ORDER BY u.id
		ON CONFLICT (source, dlq_topic, source_position, content_digest) DO NOTHING
		RETURNING id, dlq_topic, original_topic, status, failure_group, error_message
	), queued AS (
		INSERT INTO dlq.dlq_search_pending (id) SELECT id FROM ins
	), counted AS (
		INSERT INTO dlq.dlq_topic_counts AS c (dlq_topic, original_topic, status, n)
		SELECT dlq_topic, original_topic, status, count(*) FROM ins GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
		ON CONFLICT (dlq_topic, original_topic, status) DO UPDATE SET n = c.n + EXCLUDED.n
	), group_counted AS (
		INSERT INTO dlq.dlq_group_counts AS c (group_id, dlq_topic, original_topic, status, n)
		SELECT failure_group, dlq_topic, original_topic, status, count(*) FROM ins GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
		ON CONFLICT (group_id, dlq_topic, original_topic, status) DO UPDATE SET n = c.n + EXCLUDED.n
	), arrived AS (
		INSERT INTO dlq.dlq_arrivals AS a (hour, dlq_topic, failure_group, n)
		SELECT $31::timestamptz, dlq_topic, failure_group, count(*) FROM ins GROUP BY 2, 3 ORDER BY 2, 3
		ON CONFLICT (hour, dlq_topic, failure_group) DO UPDATE SET n = a.n + EXCLUDED.n
	), seen AS (
		INSERT INTO dlq.dlq_failure_groups AS g (id, pattern, exception_class, sample_error, first_seen, last_seen, error_group)
		SELECT DISTINCT ON (i.failure_group) i.failure_group, gp.pattern, gp.class, i.error_message, $14, $14, gp.eg
		FROM ins i JOIN unnest($21::text[], $22::text[], $23::text[], $30::text[]) AS gp(id, pattern, class, eg)
			ON gp.id = i.failure_group
		ORDER BY i.failure_group
		ON CONFLICT (id) DO UPDATE SET last_seen = GREATEST(g.last_seen, EXCLUDED.last_seen)
	)
	SELECT count(*) FROM ins`

// pgLeaseEnd is sqliteLeaseEnd on PostgreSQL: a claim waits for a pooled
// connection, and for the row locks of other claims, after its caller read
// the clock.
func pgLeaseEnd(until, entered string) string {
	return "(" + until + "::timestamptz + GREATEST(interval '0', clock_timestamp() - " + entered + "::timestamptz))"
}

// IngestDLQ implements sqlstore.Driver: returning replays are applied, and the
// new messages inserted with pgIngest, in one transaction.
func (p *driver) IngestDLQ(ctx context.Context, params sqlstore.IngestDLQParams) (dlq.IngestResult, error) {
	opts := params.Options
	return p.store.Ingest(ctx, params.Batch, opts.Now, func(q sqlstore.Querier, batch []dlq.Incoming, res *dlq.IngestResult) error {
		fresh, err := p.applyReturns(ctx, q, batch, opts, res)
		if err != nil || len(fresh) == 0 {
			return err
		}
		n := len(fresh)
		var (
			ids                         = make([][16]byte, n) // not uuid.UUID: pgx would encode each through its string form (driver.Valuer)
			origTopics                  = make([]string, n)
			errMsgs                     = make([]string, n)
			payloads                    = make([]*string, n)
			raws                        = make([][]byte, n)
			sources                     = make([]string, n)
			topics                      = make([]string, n)
			positions                   = make([][]byte, n)
			displays                    = make([]string, n)
			errClasses                  = make([]string, n)
			failedAttempts              = make([]int32, n)
			firstFailed                 = make([]*time.Time, n)
			originFrom                  = make([]string, n)
			originConfigured            = make([]bool, n)
			keys                        = make([][]byte, n)
			headers                     = make([][]byte, n)
			produced                    = make([]*time.Time, n)
			statuses                    = make([]string, n)
			nexts                       = make([]*time.Time, n)
			lastErrs                    = make([]*string, n)
			logs                        = make([]string, n)
			digests                     = make([][]byte, n)
			groups                      = make([]string, n)
			truncated                   = make([]bool, n)
			known                       = map[string]bool{}
			groupIDs, patterns, classes []string
			errorGroups                 []string
		)
		for i, in := range fresh {
			r := sqlstore.NewRowOf(in, opts)
			ids[i], statuses[i], nexts[i], lastErrs[i], headers[i], logs[i] = [16]byte(r.ID), r.Status, r.NextRetryAt, r.LastError,
				[]byte(r.Headers), r.Attempts
			origTopics[i], errMsgs[i], keys[i], produced[i] = in.OriginalTopic, in.ErrorMessage, in.Key, in.ProducedAt
			sources[i], topics[i], positions[i], displays[i] = in.Position.Source, in.Position.Topic, in.Position.ID,
				in.Position.Display
			errClasses[i], failedAttempts[i], firstFailed[i] = in.Origin.ErrorClass, int32(min(in.Origin.Attempts, math.MaxInt32)),
				in.Origin.FirstFailedAt
			originFrom[i], originConfigured[i] = in.Origin.From, in.Origin.Configured
			if !in.NoJSON && pgSafeJSON(in.Payload) {
				s := string(in.Payload)
				payloads[i] = &s
			}
			raws[i], truncated[i] = in.Payload, in.Truncated // nil (NULL): a null value, or one too large to keep
			digests[i] = sqlstore.DigestOf(in)
			groups[i] = r.Group.ID
			if !known[r.Group.ID] {
				known[r.Group.ID] = true
				groupIDs, patterns, classes = append(groupIDs, r.Group.ID), append(patterns, r.Group.Pattern), append(classes, r.Group.ExceptionClass)
				errorGroups = append(errorGroups, r.Group.ErrorGroup)
			}
		}
		var inserted int64
		if err := q.QueryRow(ctx, pgIngest, ids, origTopics, errMsgs, payloads, raws, sources, topics, positions, displays,
			keys, headers, produced, opts.MaxRetries, opts.Now, statuses, nexts, lastErrs, logs, digests, groups,
			groupIDs, patterns, classes, truncated, errClasses, failedAttempts, firstFailed, originFrom,
			originConfigured, errorGroups, opts.Now.UTC().Truncate(time.Hour)).Scan(&inserted); err != nil {
			return fmt.Errorf("insert dead letters: %w", err)
		}
		res.Inserted = int(inserted)
		res.Duplicates += n - res.Inserted
		return nil
	})
}

// applyReturns handles the messages of a batch that carry an x-dlq-id (see
// TakeReturn), reading and locking the records they name in one statement;
// it returns what is left to insert.
func (p *driver) applyReturns(ctx context.Context, q sqlstore.Querier, batch []dlq.Incoming, opts dlq.IngestOptions, res *dlq.IngestResult) ([]dlq.Incoming, error) {
	var ids []uuid.UUID
	for _, in := range batch {
		if in.FeedbackOf != nil {
			ids = append(ids, *in.FeedbackOf)
		}
	}
	if len(ids) == 0 {
		return batch, nil
	}
	targets, err := sqlstore.QueryAll(ctx, q, sqlstore.ScanReplayTarget, `SELECT `+sqlstore.ReplayColumns+`
		FROM dlq.dlq_messages WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
	if err != nil {
		return nil, fmt.Errorf("read replayed dead letters: %w", err)
	}
	known := map[uuid.UUID]*sqlstore.ReplayTarget{}
	for _, t := range targets {
		known[t.ID] = t
	}
	var fresh []dlq.Incoming
	for _, in := range batch {
		taken := false
		if in.FeedbackOf != nil {
			if taken, err = p.store.TakeReturn(ctx, q, in, known[*in.FeedbackOf], opts, res); err != nil {
				return nil, err
			}
		}
		if !taken {
			fresh = append(fresh, in)
		}
	}
	return fresh, nil
}

// WriteOutcomes implements sqlstore.Driver: the outcomes of a FinishDLQ
// are written in one statement, so that the per-topic counts trigger
// fires once and takes its counter rows in its sorted order. Separate
// statements for acked, counted and released messages in one transaction
// took them in statement order instead, and deadlocked against concurrent
// claims of the same topic.
func (p *driver) WriteOutcomes(ctx context.Context, q sqlstore.Querier, params sqlstore.WriteOutcomesParams) error {
	rows, now := params.Rows, params.Now
	b, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `
		UPDATE dlq.dlq_messages SET status = u.to_status, retry_count = u.to_count, next_retry_at = u.next,
			last_error = COALESCE(u.err, last_error), republished_at = COALESCE(u.republished, republished_at),
			attempt_log = COALESCE(u.attempts, attempt_log), last_retry_at = COALESCE(u.claimed, last_retry_at),
			lease_owner = NULL, lease_expires_at = NULL, updated_at = $2
		FROM jsonb_to_recordset($1::jsonb) AS u(uid uuid, to_status text, to_count int, next timestamptz, err text,
			republished timestamptz, attempts jsonb, claimed timestamptz)
		WHERE id = u.uid`, string(b), now)
	return err
}

// PrepareClaimTopic implements sqlstore.Driver: the first page of a
// retry-all refreshes the table's statistics first when they are stale.
func (p *driver) PrepareClaimTopic(ctx context.Context, params sqlstore.PrepareClaimTopicParams) {
	if params.First {
		p.refreshStats(ctx)
	}
}

// refreshStats analyzes the dead-letter table when a large share of it
// changed since the last analysis. A retry-all typically follows a burst of
// new dead letters, before autovacuum noticed it; with the old statistics the
// planner bitmap-scans and sorts the whole topic for every page of 100
// instead of walking its ordered index. Failures only cost speed.
func (p *driver) refreshStats(ctx context.Context) {
	var stale bool
	err := p.conn.QueryRow(ctx, `SELECT COALESCE(n_mod_since_analyze > GREATEST(10000, 0.1 * n_live_tup), false)
		FROM pg_stat_user_tables WHERE schemaname = 'dlq' AND relname = 'dlq_messages'`).Scan(&stale)
	if err == nil && stale {
		_, _ = p.conn.Exec(ctx, `ANALYZE dlq.dlq_messages`)
	}
}
