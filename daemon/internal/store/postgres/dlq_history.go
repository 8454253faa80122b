package postgres

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

var pgHistory = sqlstore.HistorySQL{
	Events: `SELECT at, kind, detail::text, uid FROM dlq.dlq_events WHERE message_id = $1 ORDER BY at, kind <> 'intake', id`,
	Intake: `
		SELECT created_at, source, dlq_topic, position_display, original_topic, error_message, false
		FROM dlq.dlq_messages WHERE id = $1
		UNION ALL
		SELECT created_at, source, dlq_topic, position_display, original_topic, error_message, true
		FROM dlq.dlq_messages_archive WHERE id = $1
		LIMIT 1`,
	Insert: `INSERT INTO dlq.dlq_events (message_id, at, kind, detail, uid)
		SELECT $1::uuid, $2::timestamptz, $3::text, $4::jsonb, $5::bigint WHERE EXISTS (SELECT 1 FROM dlq.dlq_messages WHERE id = $1)`,
	KeepIntake: `INSERT INTO dlq.dlq_events (message_id, at, kind, detail)
		SELECT id, created_at, 'intake', jsonb_build_object('source', source, 'topic', dlq_topic, 'position', position_display,
			'original_topic', original_topic, 'error', error_message)
		FROM dlq.dlq_messages WHERE id = $1`,
	InsertAny: `INSERT INTO dlq.dlq_events (message_id, at, kind, detail, uid) VALUES ($1, $2, $3, $4::jsonb, $5)`,
	Pause: `INSERT INTO dlq.dlq_topic_pauses AS p (dlq_topic, paused_at, reason, auto, uid) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (dlq_topic) DO UPDATE SET paused_at = EXCLUDED.paused_at, reason = EXCLUDED.reason, auto = EXCLUDED.auto,
			uid = EXCLUDED.uid, resumed_at = NULL
		WHERE p.resumed_at IS NOT NULL`,
	PauseOf: `SELECT dlq_topic, paused_at, reason, auto, uid FROM dlq.dlq_topic_pauses WHERE dlq_topic = $1`,
	Pauses:  `SELECT dlq_topic, paused_at, reason, auto, uid FROM dlq.dlq_topic_pauses WHERE resumed_at IS NULL ORDER BY dlq_topic`,
	Resume:  `UPDATE dlq.dlq_topic_pauses SET resumed_at = $2 WHERE dlq_topic = $1 AND resumed_at IS NULL`,
	CountReturns: `
		SELECT count(*) FROM dlq.dlq_events e JOIN dlq.dlq_messages m ON m.id = e.message_id
		WHERE e.kind = 'returned' AND m.dlq_topic = $1
			AND e.at >= GREATEST($2::timestamptz, (SELECT resumed_at FROM dlq.dlq_topic_pauses WHERE dlq_topic = $1))`,
}
