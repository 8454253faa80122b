ALTER TABLE dlq.dlq_operations ADD CONSTRAINT dlq_operations_action_check
    CHECK (action IN ('retry', 'revive', 'delete', 'dead', 'replay_to'));
