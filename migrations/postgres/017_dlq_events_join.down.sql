ALTER FUNCTION dlq.record_attempt_events() RESET enable_nestloop;
