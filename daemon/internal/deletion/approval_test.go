package deletion

import (
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

func TestTwoPersonRule(t *testing.T) {
	uid := func(n int64) *int64 { return &n }
	job := func(requester *int64) *Job { return &Job{ID: uuid.New(), RequestedByUID: requester} }
	for name, tc := range map[string]struct {
		job      *Job
		approver *int64
		want     string
	}{
		"another uid":            {job(uid(1001)), uid(1002), ""},
		"root approves a user's": {job(uid(1001)), uid(0), ""},
		"the requester":          {job(uid(1001)), uid(1001), "uid 1001 requested job"},
		"unknown approver":       {job(uid(1001)), nil, "the approver's uid is unknown"},
		"unknown requester":      {job(nil), uid(1002), "has no requester uid on record"},
	} {
		t.Run(name, func(t *testing.T) {
			err := checkTwoPeople(tc.job, tc.approver)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrApproverNotDistinct)
			require.ErrorContains(t, err, tc.want)
			require.False(t, errors.Is(err, derrors.ErrConflict), "its own code, not a conflict")
		})
	}
}

func TestCheckPlanHash(t *testing.T) {
	require.NoError(t, CheckPlanHash("sha256:"+"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"))
	for _, bad := range []string{"", "sha256:", "sha256:0123", "SHA256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef", "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"} {
		require.ErrorIs(t, CheckPlanHash(bad), derrors.ErrInvalid, "%q", bad)
	}
}
