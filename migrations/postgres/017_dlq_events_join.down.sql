ALTER TRIGGER trg_dlq_attempt_events ON dlq.dlq_messages RENAME TO trg_dlq_events_attempt;
ALTER FUNCTION dlq.record_attempt_events() RESET enable_nestloop;
