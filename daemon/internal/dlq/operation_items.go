package dlq

// SkippedItem is the result of the item it of a bulk retry whose message
// m (nil when it is gone) was not claimed: skipped, with why, unless the
// message could be retried but another claim held it (or ended a moment
// ago), when it is to be tried again (UnderClaim).
func SkippedItem(it OperationItem, m *Message) ItemResult {
	r := ItemResult{Seq: it.Seq, ID: it.ID, Outcome: ItemSkipped}
	if m == nil {
		r.Error = ItemGone
		return r
	}
	r.Error, r.UnderClaim = NotRetryable(m).Reason, m.IsRetryable() && (m.Status == StatusRetrying || m.Status == StatusPending)
	return r
}

// Answered reports whether an item outcome is the broker's answer to a
// send of the operation, recorded on the message: what a page recorded by
// a daemon that had lost the operation keeps for the item
// (OperationStore.RetryDLQPage), so that the daemon that took the
// operation over counts it and does not send the message again. An
// acknowledgement that came after the message's claim had run out
// (not_recorded) is not: the message is another claim's now, and that
// claim's outcome is the one that counts.
func Answered(outcome string) bool { return outcome == ItemRetried || outcome == ItemRefused }
