package dlq

import (
	"fmt"
	"testing"

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
	events := []Event{EventClaimed, EventAcked, EventRefused, EventReleased, EventReturned, EventRevived}
	require.ElementsMatch(t, Events, events, "a column per event")
	table := [][7]string{
		// from          claimed         acked           refused        released       returned       revived
		{"PENDING 0/3", "RETRYING 0/3", "-", "-", "-", "PENDING 1/3", "-"},
		{"PENDING 1/3", "RETRYING 1/3", "-", "-", "-", "PENDING 2/3", "-"},
		{"PENDING 2/3", "RETRYING 2/3", "-", "-", "-", "DEAD 3/3", "-"},
		{"PENDING 3/3", "-", "-", "-", "-", "DEAD 4/3", "-"},
		{"RETRYING 0/3", "RETRYING 0/3", "RESOLVED 0/3", "PENDING 1/3", "PENDING 0/3", "PENDING 1/3", "-"},
		{"RETRYING 1/3", "RETRYING 1/3", "RESOLVED 1/3", "PENDING 2/3", "PENDING 1/3", "PENDING 2/3", "-"},
		{"RETRYING 2/3", "RETRYING 2/3", "RESOLVED 2/3", "DEAD 3/3", "PENDING 2/3", "DEAD 3/3", "-"},
		{"RETRYING 3/3", "-", "RESOLVED 3/3", "DEAD 4/3", "PENDING 3/3", "DEAD 4/3", "-"},
		{"RESOLVED 0/3", "-", "-", "-", "-", "PENDING 1/3", "-"},
		{"RESOLVED 1/3", "-", "-", "-", "-", "PENDING 2/3", "-"},
		{"RESOLVED 2/3", "-", "-", "-", "-", "DEAD 3/3", "-"},
		{"RESOLVED 3/3", "-", "-", "-", "-", "DEAD 4/3", "-"},
		{"DEAD 0/3", "-", "-", "-", "-", "PENDING 1/3", "PENDING 0/3"},
		{"DEAD 1/3", "-", "-", "-", "-", "PENDING 2/3", "PENDING 0/3"},
		{"DEAD 2/3", "-", "-", "-", "-", "DEAD 3/3", "PENDING 0/3"},
		{"DEAD 3/3", "-", "-", "-", "-", "DEAD 4/3", "PENDING 0/3"},
		{"PENDING 0/1", "RETRYING 0/1", "-", "-", "-", "DEAD 1/1", "-"},
		{"PENDING 1/1", "-", "-", "-", "-", "DEAD 2/1", "-"},
		{"RETRYING 0/1", "RETRYING 0/1", "RESOLVED 0/1", "DEAD 1/1", "PENDING 0/1", "DEAD 1/1", "-"},
		{"RETRYING 1/1", "-", "RESOLVED 1/1", "DEAD 2/1", "PENDING 1/1", "DEAD 2/1", "-"},
		{"RESOLVED 0/1", "-", "-", "-", "-", "DEAD 1/1", "-"},
		{"RESOLVED 1/1", "-", "-", "-", "-", "DEAD 2/1", "-"},
		{"DEAD 0/1", "-", "-", "-", "-", "DEAD 1/1", "PENDING 0/1"},
		{"DEAD 1/1", "-", "-", "-", "-", "DEAD 2/1", "PENDING 0/1"},
		{"PENDING 0/0", "-", "-", "-", "-", "DEAD 1/0", "-"},
		{"RETRYING 0/0", "-", "RESOLVED 0/0", "DEAD 1/0", "PENDING 0/0", "DEAD 1/0", "-"},
		{"RESOLVED 0/0", "-", "-", "-", "-", "DEAD 1/0", "-"},
		{"DEAD 0/0", "-", "-", "-", "-", "DEAD 1/0", "PENDING 0/0"},
	}
	want := map[string][7]string{}
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
}

// TestTransitions lists every status change Next can make: the documented
// machine, and nothing else.
func TestTransitions(t *testing.T) {
	allowed := map[[2]Status]bool{
		{StatusPending, StatusRetrying}:  true, // claimed
		{StatusRetrying, StatusRetrying}: true, // claimed again after its lease ran out
		{StatusRetrying, StatusResolved}: true, // acked
		{StatusRetrying, StatusPending}:  true, // refused, released, returned
		{StatusRetrying, StatusDead}:     true, // refused or returned, the last attempt
		{StatusPending, StatusPending}:   true, // returned
		{StatusPending, StatusDead}:      true, // returned, the last attempt
		{StatusResolved, StatusPending}:  true, // returned
		{StatusResolved, StatusDead}:     true, // returned, the last attempt
		{StatusDead, StatusDead}:         true, // returned again
		{StatusDead, StatusPending}:      true, // revived, or returned with max_retries raised
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
		want          bool
		wantReasonSub string
	}{
		"new pending":          {StatusPending, 0, 3, true, ""},
		"pending with retries": {StatusPending, 2, 3, true, ""},
		"retrying":             {StatusRetrying, 1, 3, true, ""},
		"limit reached":        {StatusPending, 3, 3, false, "status=PENDING, retry_count=3/3"},
		"dead":                 {StatusDead, 3, 3, false, "status=DEAD, retry_count=3/3"},
		"resolved":             {StatusResolved, 0, 3, false, "status=RESOLVED, retry_count=0/3"},
		"max zero":             {StatusPending, 0, 0, false, "status=PENDING, retry_count=0/0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := &Message{Status: tc.status, RetryCount: tc.count, MaxRetries: tc.max}
			require.Equal(t, tc.want, m.IsRetryable())
			if tc.wantReasonSub != "" {
				require.Equal(t, "message is not retryable: "+tc.wantReasonSub, m.NotRetryableReason())
			}
		})
	}
}

// A failed attempt (refused, or a replay that came back) counts, and the
// one that reaches max_retries makes the message DEAD.
func TestAfterFailedAttempt(t *testing.T) {
	for _, e := range []Event{EventRefused, EventReturned} {
		st, _ := State{Status: StatusRetrying, RetryCount: 0, MaxRetries: 3}.Next(e)
		require.Equal(t, State{Status: StatusPending, RetryCount: 1, MaxRetries: 3}, st, e)
		st, _ = State{Status: StatusRetrying, RetryCount: 1, MaxRetries: 3}.Next(e)
		require.Equal(t, State{Status: StatusPending, RetryCount: 2, MaxRetries: 3}, st, e)
		st, _ = State{Status: StatusRetrying, RetryCount: 2, MaxRetries: 3}.Next(e)
		require.Equal(t, State{Status: StatusDead, RetryCount: 3, MaxRetries: 3}, st, e)
		st, _ = State{Status: StatusRetrying, RetryCount: 0, MaxRetries: 1}.Next(e)
		require.Equal(t, StatusDead, st.Status, e)
	}
}

// Finish decides a claim's outcome from the row as it was claimed, and
// names it for the history and the metrics.
func TestFinish(t *testing.T) {
	m := Message{ID: uuid.New(), Status: StatusRetrying, RetryCount: 1, MaxRetries: 3}
	tests := map[string]struct {
		m         Message
		event     Event
		err       string
		to        State
		name      string
		lastError *string
	}{
		"acked":             {m, EventAcked, "", State{StatusResolved, 1, 3}, OutcomeResolved, nil},
		"acked keeps error": {m, EventAcked, "ignored", State{StatusResolved, 1, 3}, OutcomeResolved, nil},
		"refused":           {m, EventRefused, "too large", State{StatusPending, 2, 3}, OutcomeFailed, ptr("too large")},
		"refused, last":     {Message{ID: m.ID, RetryCount: 2, MaxRetries: 3}, EventRefused, "x", State{StatusDead, 3, 3}, OutcomeDead, ptr("x")},
		"released":          {m, EventReleased, "source down", State{StatusPending, 1, 3}, OutcomeUnavailable, ptr("source down")},
		"released quietly":  {m, EventReleased, "", State{StatusPending, 1, 3}, OutcomeUnavailable, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := Finish(tc.m, tc.event)
			o.Error = tc.err
			require.Equal(t, tc.m.ID, o.ID)
			require.Equal(t, State{Status: StatusRetrying, RetryCount: tc.m.RetryCount, MaxRetries: 3}, o.From, "the claimed row")
			require.Equal(t, tc.to, o.To)
			require.Equal(t, tc.name, o.Name())
			require.Contains(t, outcomeNames, o.Name(), "a metric label")
			require.Equal(t, tc.lastError, o.LastError())
			require.Equal(t, tc.event == EventAcked, o.Republished())
		})
	}
	for _, e := range []Event{EventClaimed, EventReturned, EventRevived} {
		require.Panics(t, func() { Finish(m, e) }, e)
	}
}

func ptr(s string) *string { return &s }
