package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/lifecycled/lifecycled/daemon/internal/dlq"
)

var pgHistory = historySQL{
	events: `SELECT at, kind, detail::text, uid FROM dlq.dlq_events WHERE message_id = $1 ORDER BY at, kind <> 'intake', id`,
	intake: `
		SELECT created_at, source, dlq_topic, source_partition, source_offset, original_topic, error_message, false
		FROM dlq.dlq_messages WHERE id = $1
		UNION ALL
		SELECT created_at, source, dlq_topic, source_partition, source_offset, original_topic, error_message, true
		FROM dlq.dlq_messages_archive WHERE id = $1
		LIMIT 1`,
	insert: `INSERT INTO dlq.dlq_events (message_id, at, kind, detail, uid)
		SELECT $1::uuid, $2::timestamptz, $3::text, $4::jsonb, $5::bigint WHERE EXISTS (SELECT 1 FROM dlq.dlq_messages WHERE id = $1)`,
	keepIntake: `INSERT INTO dlq.dlq_events (message_id, at, kind, detail)
		SELECT id, created_at, 'intake', jsonb_build_object('source', source, 'topic', dlq_topic, 'partition', source_partition,
			'offset', source_offset, 'original_topic', original_topic, 'error', error_message)
		FROM dlq.dlq_messages WHERE id = $1`,
	insertAny: `INSERT INTO dlq.dlq_events (message_id, at, kind, detail, uid) VALUES ($1, $2, $3, $4::jsonb, $5)`,
	pause: `INSERT INTO dlq.dlq_topic_pauses AS p (dlq_topic, paused_at, reason, auto, uid) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (dlq_topic) DO UPDATE SET paused_at = EXCLUDED.paused_at, reason = EXCLUDED.reason, auto = EXCLUDED.auto,
			uid = EXCLUDED.uid, resumed_at = NULL
		WHERE p.resumed_at IS NOT NULL`,
	pauseOf: `SELECT dlq_topic, paused_at, reason, auto, uid FROM dlq.dlq_topic_pauses WHERE dlq_topic = $1`,
	pauses:  `SELECT dlq_topic, paused_at, reason, auto, uid FROM dlq.dlq_topic_pauses WHERE resumed_at IS NULL ORDER BY dlq_topic`,
	resume:  `UPDATE dlq.dlq_topic_pauses SET resumed_at = $2 WHERE dlq_topic = $1 AND resumed_at IS NULL`,
	countReturns: `
		SELECT count(*) FROM dlq.dlq_events e JOIN dlq.dlq_messages m ON m.id = e.message_id
		WHERE e.kind = 'returned' AND m.dlq_topic = $1
			AND e.at >= GREATEST($2::timestamptz, (SELECT resumed_at FROM dlq.dlq_topic_pauses WHERE dlq_topic = $1))`,
}

// DLQHistory implements dlq.HistoryStore.
func (s *Postgres) DLQHistory(ctx context.Context, id uuid.UUID) ([]dlq.HistoryEvent, error) {
	return s.dlqHistory(ctx, pgHistory, id)
}

// RecordDLQEvent implements dlq.HistoryStore.
func (s *Postgres) RecordDLQEvent(ctx context.Context, id uuid.UUID, e dlq.HistoryEvent) error {
	return s.recordDLQEvent(ctx, pgHistory, id, e)
}

// DeleteDLQAs implements dlq.HistoryStore.
func (s *Postgres) DeleteDLQAs(ctx context.Context, id uuid.UUID, e dlq.HistoryEvent) error {
	return s.deleteDLQAs(ctx, pgHistory, id, e)
}

// PauseDLQTopic implements dlq.PauseStore.
func (s *Postgres) PauseDLQTopic(ctx context.Context, p dlq.TopicPause) (dlq.TopicPause, bool, error) {
	return s.pauseDLQTopic(ctx, pgHistory, p)
}

// ResumeDLQTopic implements dlq.PauseStore.
func (s *Postgres) ResumeDLQTopic(ctx context.Context, topic string, now time.Time) (bool, error) {
	return s.resumeDLQTopic(ctx, pgHistory, topic, now)
}

// DLQTopicPauses implements dlq.PauseStore.
func (s *Postgres) DLQTopicPauses(ctx context.Context) ([]dlq.TopicPause, error) {
	return s.dlqTopicPauses(ctx, pgHistory)
}

// CountReturnsDLQ implements dlq.PauseStore.
func (s *Postgres) CountReturnsDLQ(ctx context.Context, topic string, since time.Time) (int64, error) {
	return s.countReturnsDLQ(ctx, pgHistory, topic, since)
}
