package dlq

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestStatusStringsRoundTrip(t *testing.T) {
	for _, s := range Statuses {
		got, err := ParseStatus(s.String())
		require.NoError(t, err)
		require.Equal(t, s, got)
	}
	for _, bad := range []string{"", "pending", "DONE", "PENDING ", "RESOLVED\x00"} {
		_, err := ParseStatus(bad)
		require.ErrorIs(t, err, ErrInvalidStatus, bad)
	}
}

// stateString is a state as the table below writes it: "PENDING 1/3".
func stateString(s State) string {
	return fmt.Sprintf("%s %d/%d", s.Status, s.RetryCount, s.MaxRetries)
}

// TestStateMachine checks Next on every status, with every attempt count
// around max_retries, for every event: "-" means the event cannot happen
// there and the state does not change.
func TestStateMachine(t *testing.T) {
	events := []Event{EventClaimed, EventAcked, EventRefused, EventReleased, EventReturned, EventRevived, EventBuried}
	require.ElementsMatch(t, Events, events, "a column per event")
	table := [][8]string{
		// from          claimed         acked           refused        released       returned       revived        buried
		{"PENDING 0/3", "RETRYING 0/3", "-", "-", "-", "PENDING 1/3", "-", "DEAD 0/3"},
		{"PENDING 1/3", "RETRYING 1/3", "-", "-", "-", "PENDING 2/3", "-", "DEAD 1/3"},
		{"PENDING 2/3", "RETRYING 2/3", "-", "-", "-", "DEAD 3/3", "-", "DEAD 2/3"},
		{"PENDING 3/3", "-", "-", "-", "-", "DEAD 4/3", "-", "DEAD 3/3"},
		{"RETRYING 0/3", "RETRYING 0/3", "RESOLVED 0/3", "PENDING 1/3", "PENDING 0/3", "RETRYING 1/3", "-", "-"},
		{"RETRYING 1/3", "RETRYING 1/3", "RESOLVED 1/3", "PENDING 2/3", "PENDING 1/3", "RETRYING 2/3", "-", "-"},
		{"RETRYING 2/3", "RETRYING 2/3", "RESOLVED 2/3", "DEAD 3/3", "PENDING 2/3", "RETRYING 3/3", "-", "-"},
		{"RETRYING 3/3", "-", "RESOLVED 3/3", "DEAD 4/3", "DEAD 3/3", "RETRYING 4/3", "-", "-"},
		{"RESOLVED 0/3", "-", "-", "-", "-", "PENDING 1/3", "-", "-"},
		{"RESOLVED 1/3", "-", "-", "-", "-", "PENDING 2/3", "-", "-"},
		{"RESOLVED 2/3", "-", "-", "-", "-", "DEAD 3/3", "-", "-"},
		{"RESOLVED 3/3", "-", "-", "-", "-", "DEAD 4/3", "-", "-"},
		{"DEAD 0/3", "-", "-", "-", "-", "PENDING 1/3", "PENDING 0/3", "-"},
		{"DEAD 1/3", "-", "-", "-", "-", "PENDING 2/3", "PENDING 0/3", "-"},
		{"DEAD 2/3", "-", "-", "-", "-", "DEAD 3/3", "PENDING 0/3", "-"},
		{"DEAD 3/3", "-", "-", "-", "-", "DEAD 4/3", "PENDING 0/3", "-"},
		{"PENDING 0/1", "RETRYING 0/1", "-", "-", "-", "DEAD 1/1", "-", "DEAD 0/1"},
		{"PENDING 1/1", "-", "-", "-", "-", "DEAD 2/1", "-", "DEAD 1/1"},
		{"RETRYING 0/1", "RETRYING 0/1", "RESOLVED 0/1", "DEAD 1/1", "PENDING 0/1", "RETRYING 1/1", "-", "-"},
		{"RETRYING 1/1", "-", "RESOLVED 1/1", "DEAD 2/1", "DEAD 1/1", "RETRYING 2/1", "-", "-"},
		{"RESOLVED 0/1", "-", "-", "-", "-", "DEAD 1/1", "-", "-"},
		{"RESOLVED 1/1", "-", "-", "-", "-", "DEAD 2/1", "-", "-"},
		{"DEAD 0/1", "-", "-", "-", "-", "DEAD 1/1", "PENDING 0/1", "-"},
		{"DEAD 1/1", "-", "-", "-", "-", "DEAD 2/1", "PENDING 0/1", "-"},
		{"PENDING 0/0", "-", "-", "-", "-", "DEAD 1/0", "-", "DEAD 0/0"},
		{"RETRYING 0/0", "-", "RESOLVED 0/0", "DEAD 1/0", "DEAD 0/0", "RETRYING 1/0", "-", "-"},
		{"RESOLVED 0/0", "-", "-", "-", "-", "DEAD 1/0", "-", "-"},
		{"DEAD 0/0", "-", "-", "-", "-", "DEAD 1/0", "PENDING 0/0", "-"},
	}
	want := map[string][8]string{}
	for _, row := range table {
		want[row[0]] = row
	}
	for _, max := range []int{3, 1, 0} {
		for _, status := range Statuses {
			for count := 0; count <= max; count++ {
				from := State{Status: status, RetryCount: count, MaxRetries: max}
				row, ok := want[stateString(from)]
				require.True(t, ok, "the table has a row for %s", stateString(from))
				for i, e := range events {
					to, ok := from.Next(e)
					got := "-"
					if ok {
						got = stateString(to)
					} else {
						require.Equal(t, from, to, "%s on %s: a refused event changes nothing", e, stateString(from))
					}
					require.Equal(t, row[i+1], got, "%s on %s", e, stateString(from))
				}
			}
		}
	}
	_, ok := State{Status: StatusPending, MaxRetries: 3}.Next(Event("kicked"))
	require.False(t, ok, "an unknown event")

	// A message without an original topic is never claimed; everything
	// else happens to it as to any other.
	for _, status := range Statuses {
		for count := 0; count <= 3; count++ {
			with := State{Status: status, RetryCount: count, MaxRetries: 3}
			without := with
			without.NoOriginalTopic = true
			for _, e := range Events {
				want, wantOK := with.Next(e)
				want.NoOriginalTopic = true
				if e == EventClaimed {
					want, wantOK = without, false
				}
				got, ok := without.Next(e)
				require.Equal(t, wantOK, ok, "%s on %s without an original topic", e, stateString(with))
				require.Equal(t, want, got, "%s on %s without an original topic", e, stateString(with))
			}
		}
	}
}

// TestTransitions lists every status change Next can make: the documented
// machine, and nothing else.
func TestTransitions(t *testing.T) {
	allowed := map[[2]Status]bool{
		{StatusPending, StatusRetrying}:  true, // claimed
		{StatusRetrying, StatusRetrying}: true, // claimed again after its lease ran out; returned during the claim
		{StatusRetrying, StatusResolved}: true, // acked
		{StatusRetrying, StatusPending}:  true, // refused, released
		{StatusRetrying, StatusDead}:     true, // refused, the last attempt; released with no attempts left
		{StatusPending, StatusPending}:   true, // returned
		{StatusPending, StatusDead}:      true, // returned, the last attempt
		{StatusResolved, StatusPending}:  true, // returned
		{StatusResolved, StatusDead}:     true, // returned, the last attempt
		{StatusDead, StatusDead}:         true, // returned again
		{StatusDead, StatusPending}:      true, // revived, or returned with max_retries raised
		// PENDING -> DEAD: returned, the last attempt; buried by an operator
	}
	seen := map[[2]Status]bool{}
	for _, from := range Statuses {
		for count := 0; count <= 4; count++ {
			for _, e := range Events {
				if to, ok := (State{Status: from, RetryCount: count, MaxRetries: 3}).Next(e); ok {
					require.True(t, allowed[[2]Status{from, to.Status}], "%s -> %s on %s", from, to.Status, e)
					seen[[2]Status{from, to.Status}] = true
				}
			}
		}
	}
	require.Equal(t, allowed, seen, "every documented transition happens")
}

func TestIsRetryable(t *testing.T) {
	tests := map[string]struct {
		status        Status
		count, max    int
		original      string
		want          bool
		wantReasonSub string
	}{
		"new pending":          {StatusPending, 0, 3, "o", true, ""},
		"pending with retries": {StatusPending, 2, 3, "o", true, ""},
		"retrying":             {StatusRetrying, 1, 3, "o", true, ""},
		"limit reached":        {StatusPending, 3, 3, "o", false, "message is not retryable: status=PENDING, retry_count=3/3"},
		"dead":                 {StatusDead, 3, 3, "o", false, "message is not retryable: status=DEAD, retry_count=3/3"},
		"resolved":             {StatusResolved, 0, 3, "o", false, "message is not retryable: status=RESOLVED, retry_count=0/3"},
		"max zero":             {StatusPending, 0, 0, "o", false, "message is not retryable: status=PENDING, retry_count=0/0"},
		"no original topic":    {StatusPending, 0, 3, "", false, "it has no original topic to republish to"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := &Message{Status: tc.status, RetryCount: tc.count, MaxRetries: tc.max, OriginalTopic: tc.original}
			require.Equal(t, tc.want, m.IsRetryable())
			if tc.wantReasonSub != "" {
				require.Contains(t, m.NotRetryableReason(), tc.wantReasonSub)
			}
		})
	}
}

// A failed attempt (refused, or a replay that came back) counts, and the
// one that reaches max_retries makes the message DEAD.
func TestAfterFailedAttempt(t *testing.T) {
	for e, from := range map[Event]Status{EventRefused: StatusRetrying, EventReturned: StatusPending} {
		st, _ := State{Status: from, RetryCount: 0, MaxRetries: 3}.Next(e)
		require.Equal(t, State{Status: StatusPending, RetryCount: 1, MaxRetries: 3}, st, e)
		st, _ = State{Status: from, RetryCount: 1, MaxRetries: 3}.Next(e)
		require.Equal(t, State{Status: StatusPending, RetryCount: 2, MaxRetries: 3}, st, e)
		st, _ = State{Status: from, RetryCount: 2, MaxRetries: 3}.Next(e)
		require.Equal(t, State{Status: StatusDead, RetryCount: 3, MaxRetries: 3}, st, e)
		st, _ = State{Status: from, RetryCount: 0, MaxRetries: 1}.Next(e)
		require.Equal(t, StatusDead, st.Status, e)
	}
}

// Apply decides a claim's outcome from the row as the store finds it when
// the outcome is recorded, names it for the history and the metrics, and
// changes nothing when the row is no longer under the claim.
func TestOutcomeApply(t *testing.T) {
	claimedAt := t0.Add(time.Minute)
	m := Message{ID: uuid.New(), Status: StatusRetrying, RetryCount: 1, MaxRetries: 3, OriginalTopic: "o", LastRetryAt: &claimedAt}
	under := func(count int) Current {
		return Current{State: State{Status: StatusRetrying, RetryCount: count, MaxRetries: 3}, LeaseOwner: "d", ClaimedAt: &claimedAt}
	}
	tests := map[string]struct {
		event     Event
		err       string
		cur       Current
		to        State
		name      string
		lastError *string
	}{
		"acked":             {EventAcked, "", under(1), State{Status: StatusResolved, RetryCount: 1, MaxRetries: 3}, OutcomeResolved, nil},
		"acked keeps error": {EventAcked, "ignored", under(1), State{Status: StatusResolved, RetryCount: 1, MaxRetries: 3}, OutcomeResolved, nil},
		"refused":           {EventRefused, "too large", under(1), State{Status: StatusPending, RetryCount: 2, MaxRetries: 3}, OutcomeFailed, ptr("too large")},
		"refused, last":     {EventRefused, "x", under(2), State{Status: StatusDead, RetryCount: 3, MaxRetries: 3}, OutcomeDead, ptr("x")},
		"released":          {EventReleased, "source down", under(1), State{Status: StatusPending, RetryCount: 1, MaxRetries: 3}, OutcomeUnavailable, ptr("source down")},
		"released quietly":  {EventReleased, "", under(1), State{Status: StatusPending, RetryCount: 1, MaxRetries: 3}, OutcomeUnavailable, nil},
		// Returns counted during the claim are part of the decision.
		"acked after a return":       {EventAcked, "", under(2), State{Status: StatusResolved, RetryCount: 2, MaxRetries: 3}, OutcomeResolved, nil},
		"refused after a return":     {EventRefused, "x", under(2), State{Status: StatusDead, RetryCount: 3, MaxRetries: 3}, OutcomeDead, ptr("x")},
		"released, attempts used up": {EventReleased, "source down", under(3), State{Status: StatusDead, RetryCount: 3, MaxRetries: 3}, OutcomeDead, ptr("source down")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := Finish(m, tc.event)
			o.Error, o.At, o.Trigger, o.Attempted = tc.err, t0.Add(time.Hour), TriggerAuto, true
			next := t0.Add(2 * time.Hour)
			o.NextRetryAt = func(n int) *time.Time { require.Equal(t, tc.to.RetryCount, n); return &next }
			require.Equal(t, m.ID, o.ID)
			require.Equal(t, claimedAt, o.ClaimedAt)
			r, ok := o.Apply("d", tc.cur)
			require.True(t, ok)
			require.Equal(t, tc.to, r.To)
			require.Equal(t, tc.name, r.Name)
			require.Contains(t, outcomeNames, r.Name, "a metric label")
			require.Equal(t, tc.lastError, r.LastError)
			require.Equal(t, tc.event == EventAcked, r.Republished)
			if tc.to.Status == StatusPending {
				require.Equal(t, &next, r.NextRetryAt)
			} else {
				require.Nil(t, r.NextRetryAt)
			}
			require.Equal(t, []Attempt{{At: t0.Add(time.Hour), Outcome: tc.name, Error: tc.err, Trigger: TriggerAuto}}, r.Attempts)

			// Not under this claim any more: nothing changes.
			other := time.Now()
			for why, cur := range map[string]Current{
				"another owner":  {State: tc.cur.State, LeaseOwner: "e", ClaimedAt: &claimedAt},
				"another claim":  {State: tc.cur.State, LeaseOwner: "d", ClaimedAt: &other},
				"released":       {State: State{Status: StatusPending, RetryCount: 1, MaxRetries: 3}, ClaimedAt: &claimedAt},
				"never claimed":  {State: tc.cur.State, LeaseOwner: "d"},
				"already solved": {State: State{Status: StatusResolved, RetryCount: 1, MaxRetries: 3}, LeaseOwner: "d", ClaimedAt: &claimedAt},
			} {
				_, ok := o.Apply("d", cur)
				require.False(t, ok, why)
			}
		})
	}
	quiet := Finish(m, EventReleased)
	r, ok := quiet.Apply("d", under(1))
	require.True(t, ok)
	require.Nil(t, r.Attempts, "a claim handed back unused leaves no history entry")
	for _, e := range []Event{EventClaimed, EventReturned, EventRevived} {
		require.Panics(t, func() { Finish(m, e) }, e)
	}
}

// Identical "unavailable" outcomes in a row are one entry with a count, so
// a source that stays down never pushes the real attempts out of the
// history; anything else is an entry of its own, the newest MaxAttempts kept.
func TestAppendAttemptFoldsRepeatedUnavailableOutcomes(t *testing.T) {
	failed := Attempt{At: t0, Outcome: OutcomeFailed, Error: "refused", Trigger: TriggerAuto}
	down := func(i int, err string) Attempt {
		return Attempt{At: t0.Add(time.Duration(i) * time.Minute), Outcome: OutcomeUnavailable, Error: err, Trigger: TriggerAuto}
	}
	h := AppendAttempt(nil, failed)
	for i := 1; i <= 200; i++ {
		h = AppendAttempt(h, down(i, "source kafka is not running"))
	}
	last := t0.Add(200 * time.Minute)
	require.Equal(t, []Attempt{failed, {At: t0.Add(time.Minute), Outcome: OutcomeUnavailable, Error: "source kafka is not running",
		Trigger: TriggerAuto, Count: 200, LastAt: &last}}, h)

	h = AppendAttempt(h, down(201, "another reason"))
	h = AppendAttempt(h, Attempt{At: t0, Outcome: OutcomeUnavailable, Error: "another reason", Trigger: TriggerManual})
	require.Len(t, h, 4, "another error, another trigger: entries of their own")

	var long []Attempt
	for i := 0; i < MaxAttempts+10; i++ {
		long = AppendAttempt(long, Attempt{At: t0.Add(time.Duration(i) * time.Second), Outcome: OutcomeFailed})
	}
	require.Len(t, long, MaxAttempts)
	require.Equal(t, t0.Add(10*time.Second), long[0].At, "the newest are kept")
}

func ptr(s string) *string { return &s }
