package sqlite

import "github.com/lifecycled/lifecycled/daemon/internal/store/sqlstore"

var sqliteHistory = sqlstore.HistorySQL{
	Events: `SELECT at, kind, detail, uid FROM dlq_events WHERE message_id = ?1 ORDER BY at, kind <> 'intake', id`,
	Intake: `
		SELECT created_at, source, dlq_topic, position_display, original_topic, error_message, 0
		FROM dlq_messages WHERE id = ?1
		UNION ALL
		SELECT created_at, source, dlq_topic, position_display, original_topic, error_message, 1
		FROM dlq_messages_archive WHERE id = ?1
		LIMIT 1`,
	Insert: `INSERT INTO dlq_events (message_id, at, kind, detail, uid)
		SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM dlq_messages WHERE id = ?1)`,
	KeepIntake: `INSERT INTO dlq_events (message_id, at, kind, detail)
		SELECT id, created_at, 'intake', json_object('source', source, 'topic', dlq_topic, 'position', position_display,
			'original_topic', original_topic, 'error', error_message)
		FROM dlq_messages WHERE id = ?1`,
	InsertAny: `INSERT INTO dlq_events (message_id, at, kind, detail, uid) VALUES (?1, ?2, ?3, ?4, ?5)`,
	Pause: `INSERT INTO dlq_topic_pauses (dlq_topic, paused_at, reason, auto, uid) VALUES (?1, ?2, ?3, ?4, ?5)
		ON CONFLICT (dlq_topic) DO UPDATE SET paused_at = excluded.paused_at, reason = excluded.reason, auto = excluded.auto,
			uid = excluded.uid, resumed_at = NULL
		WHERE dlq_topic_pauses.resumed_at IS NOT NULL`,
	PauseOf: `SELECT dlq_topic, paused_at, reason, auto, uid FROM dlq_topic_pauses WHERE dlq_topic = ?1`,
	Pauses:  `SELECT dlq_topic, paused_at, reason, auto, uid FROM dlq_topic_pauses WHERE resumed_at IS NULL ORDER BY dlq_topic`,
	Resume:  `UPDATE dlq_topic_pauses SET resumed_at = ?2 WHERE dlq_topic = ?1 AND resumed_at IS NULL`,
	CountReturns: `
		SELECT count(*) FROM dlq_events e JOIN dlq_messages m ON m.id = e.message_id
		WHERE e.kind = 'returned' AND m.dlq_topic = ?1
			AND e.at >= MAX(?2, COALESCE((SELECT resumed_at FROM dlq_topic_pauses WHERE dlq_topic = ?1), ?2))`,
}
